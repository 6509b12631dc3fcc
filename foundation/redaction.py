"""Credentials taken out of URLs before any text is shown or written.

A URL a user passes (`--input=https://user:password@host/...`, a signed
link, `$ALBERT_TF_MIRROR`) may carry a secret: the password of its
`user:password@`, or a token in its query string. `redact` replaces those
in every URL inside a text, so a log line, an error or a file that names
the URL never holds the secret; `split_credentials` takes the
`user:password@` out of a URL for a request that sends it as a header.
Guide: docs/converting.md (the model cache).
"""

import re
import urllib.parse

MASK = "***"

# Query (or fragment) parameters whose value is a secret, lower case.
SECRET_PARAMETERS = frozenset({
    "access_token", "api_key", "apikey", "auth", "authorization", "code",
    "credential", "credentials", "id_token", "key", "passwd", "password",
    "pwd", "refresh_token", "secret", "session", "sig", "signature", "token",
    "x-amz-credential", "x-amz-security-token", "x-amz-signature",
    "x-goog-credential", "x-goog-signature",
})
# A parameter whose name holds one of these is a secret too
# (`client_secret`, `hf_token`, `X-Amz-Signature`...).
SECRET_PARTS = ("token", "secret", "password", "passwd", "signature",
                "api_key", "apikey", "credential")

# A URL inside a text: a scheme, `://`, then anything up to a space or a
# character that closes a quoted or bracketed URL.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
# `name=value` in a query or a fragment.
_PARAMETER = re.compile(r"([?&;#])([^=&;#?]+)=([^&;#]*)")


def redact(text):
    """`text` with the credentials of every URL in it replaced by `***`.

    `scheme://user:password@host` becomes `scheme://user:***@host`, a user
    name alone (a token written as one, `https://TOKEN@host`) becomes
    `***@host`, and the value of every query or fragment parameter named
    like a secret (`token`, `access_token`, `key`, `sig`, `X-Amz-Signature`,
    `password`... in any case) becomes `***`. The rest of the text is kept.

    Args:
        text: any text (an error message, a log line, a URL); not a
            string: converted with `str`.

    Returns:
        The text without credentials.
    """
    return _URL.sub(lambda match: _redact_url(match.group(0)), str(text))


def _redact_url(url):
    scheme, rest = url.split("://", 1)
    authority_end = len(rest)
    for separator in "/?#":
        index = rest.find(separator)
        if index != -1:
            authority_end = min(authority_end, index)
    authority, tail = rest[:authority_end], rest[authority_end:]
    if "@" in authority:
        userinfo, host = authority.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        userinfo = f"{user}:{MASK}" if has_password and user else MASK
        authority = f"{userinfo}@{host}"
    return f"{scheme}://{authority}{_PARAMETER.sub(_redact_parameter, tail)}"


def _redact_parameter(match):
    separator, name, value = match.groups()
    if value and is_secret_parameter(name):
        value = MASK
    return f"{separator}{name}={value}"


def is_secret_parameter(name):
    """Whether a query parameter of this name carries a secret."""
    name = urllib.parse.unquote(name).strip().lower()
    return name in SECRET_PARAMETERS or any(
        part in name for part in SECRET_PARTS)


def split_credentials(url):
    """`url` without its `user:password@`, and the credentials apart.

    Args:
        url: a URL.

    Returns:
        `(url, None)` when it has no user name, else
        `(url_without_userinfo, (user, password))` with both unquoted
        (`password` is "" when the URL gives none).
    """
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, (urllib.parse.unquote(user), urllib.parse.unquote(password))


__all__ = ["MASK", "SECRET_PARAMETERS", "is_secret_parameter", "redact",
           "split_credentials"]
