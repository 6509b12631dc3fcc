"""Tests of foundation.redaction: credentials out of every URL in a text."""

import pytest

from foundation import redaction


@pytest.mark.parametrize("text,expected", [
    ("https://user:hunter2@host/a.tar.gz",
     "https://user:***@host/a.tar.gz"),
    ("http://ghp_abcdef@github.com/x", "http://***@github.com/x"),
    # An unencoded @ in the password: the host is after the last one.
    ("http://u:p@ss@host:8080/m.tgz", "http://u:***@host:8080/m.tgz"),
    ("https://h/m.tar.gz?token=abc&v=2", "https://h/m.tar.gz?token=***&v=2"),
    ("https://b.s3.amazonaws.com/m.tgz?X-Amz-Credential=AK%2F1&"
     "X-Amz-Signature=f00d&X-Amz-Expires=60",
     "https://b.s3.amazonaws.com/m.tgz?X-Amz-Credential=***&"
     "X-Amz-Signature=***&X-Amz-Expires=60"),
    ("https://h/m?API_KEY=1&Sig=2&hf_token=3&client_secret=4&page=5",
     "https://h/m?API_KEY=***&Sig=***&hf_token=***&client_secret=***&page=5"),
    ("https://h/cb#access_token=xyz&state=ok",
     "https://h/cb#access_token=***&state=ok"),
    ("https://storage.googleapis.com/albert_models/albert_base_v2.tar.gz",
     "https://storage.googleapis.com/albert_models/albert_base_v2.tar.gz"),
    ("no url here: user:password@host", "no url here: user:password@host"),
])
def test_redact_one_url(text, expected):
    assert redaction.redact(text) == expected


def test_redact_every_url_of_a_message_and_keeps_the_rest():
    message = ("Cannot load 'http://me:s3cret@127.0.0.1:9/x.tar.gz' from "
               "http://me:s3cret@127.0.0.1:9/x.tar.gz: HTTP 401. Mirror: "
               "https://m/?key=k1 (or ftp://a:b@c/)")
    redacted = redaction.redact(message)
    assert "s3cret" not in redacted and "k1" not in redacted
    assert ":b@" not in redacted
    assert redacted == (
        "Cannot load 'http://me:***@127.0.0.1:9/x.tar.gz' from "
        "http://me:***@127.0.0.1:9/x.tar.gz: HTTP 401. Mirror: "
        "https://m/?key=*** (or ftp://a:***@c/)")


def test_redact_takes_any_object():
    assert redaction.redact(ValueError("at https://a:b@h/")) == \
        "at https://a:***@h/"


def test_split_credentials():
    assert redaction.split_credentials("https://h/x?y=1") == (
        "https://h/x?y=1", None)
    assert redaction.split_credentials("http://me:p%40ss@h:81/a.tgz") == (
        "http://h:81/a.tgz", ("me", "p@ss"))
    assert redaction.split_credentials("http://tok@h/a") == (
        "http://h/a", ("tok", ""))
