"""Unpacking a downloaded archive only after checking every member.

The standard library's `tarfile` filters decide from resolved paths, and
those checks have been bypassed (chains of links and long names on Pythons
before 3.11.13, 3.12.11 and 3.13.4). This module does not depend on them:
`extract` reads every member's header first and refuses the whole archive,
in one line naming the member and why, unless each member is a regular file
or a folder with a relative, normalized name inside the destination. Links,
hard links, devices and pipes are refused whatever they point to, so no
name can lead outside. Only then does it write, itself: folders, and files
created new (never through a link), with the user's umask instead of the
archive's modes and owners. Nothing is written when a member is refused.
Guide: docs/converting.md (the model cache).
"""

import functools
import os
import re
import tarfile

# Bounds on what an archive may hold: the largest released model is a few
# gigabytes in a handful of files.
MAX_MEMBERS = 10_000
MAX_BYTES = 64 << 30
# Longest name component and path the destination's file systems take.
MAX_COMPONENT = 255
MAX_PATH = 4000

_CHUNK = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")


class ArchiveError(ValueError):
    """An archive refused (one line naming the member and why), or one
    that cannot be read."""


def _shown(name):
    """A member's name or link target for a one-line message: quoted,
    control characters escaped, a long one cut."""
    if len(name) > 80:
        return repr(name[:60])[:-1] + f"...' ({len(name)} characters)"
    return repr(name)


def _kind(member):
    """What a member is, for a refusal."""
    if member.issym():
        return f"a symbolic link (to {_shown(member.linkname)})"
    if member.islnk():
        return f"a hard link (to {_shown(member.linkname)})"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a named pipe"
    return f"of tar type {member.type!r}"


def member_path(name):
    """The normalized relative path of a member name, or why it is refused.

    Args:
        name: the member's name as the archive spells it.

    Returns:
        `(parts, None)`: the path's components (`.` and empty ones
        dropped); or `(None, reason)`.
    """
    if not name:
        return None, "has an empty name"
    if "\x00" in name:
        return None, "has a NUL in its name"
    if "\\" in name:
        return None, "has a backslash in its name (a Windows path)"
    if name.startswith("/"):
        return None, "is an absolute path"
    if _DRIVE.match(name):
        return None, "starts with a drive"
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None, "climbs out with '..'"
    if not parts:
        return [], None
    if any(len(p.encode("utf-8", "surrogateescape")) > MAX_COMPONENT
           for p in parts):
        return None, f"has a name component over {MAX_COMPONENT} bytes"
    if len(name.encode("utf-8", "surrogateescape")) > MAX_PATH:
        return None, f"has a path over {MAX_PATH} bytes"
    return parts, None


def _too_many(max_members):
    return ArchiveError(f"the archive holds more than {max_members:,} "
                        "members, the most allowed; nothing was extracted")


def _refused(member, reason):
    return ArchiveError(f"the archive's member {_shown(member.name)} {reason}; "
                        "nothing was extracted")


def check_members(members, max_members=MAX_MEMBERS, max_bytes=MAX_BYTES):
    """The members to extract, each with its path, once all are checked.

    Args:
        members: the archive's `tarfile.TarInfo`s, in order.
        max_members: the most members an archive may hold.
        max_bytes: the most bytes its files may hold together.

    Returns:
        A list of `(parts, member)` (the archive's top folder `.` left out).

    Raises:
        ArchiveError: the first member refused, named with the reason.
    """
    if len(members) > max_members:
        raise _too_many(max_members)
    checked, files, folders, total = [], set(), set(), 0
    for member in members:
        refuse = functools.partial(_refused, member)
        if not (member.isreg() or member.isdir()):
            raise refuse(f"is {_kind(member)}, not a file or a folder")
        parts, reason = member_path(member.name)
        if reason:
            raise refuse(reason)
        if not parts:
            if member.isdir():
                continue  # the archive's `./`: the destination itself
            raise refuse("is a file without a name")
        parents = ["/".join(parts[:depth]) for depth in range(1, len(parts))]
        clash = next((p for p in parents if p in files), None)
        if clash:
            raise refuse(f"lies under {clash!r}, which the archive holds as "
                         "a file")
        key = "/".join(parts)
        if key in files:
            raise refuse("appears twice" if member.isreg() else
                         "is a folder where the archive holds a file")
        if member.isreg():
            if key in folders:
                raise refuse("is a file where the archive holds a folder")
            files.add(key)
        else:
            folders.add(key)
        folders.update(parents)
        total += member.size if member.isreg() else 0
        if total > max_bytes:
            raise ArchiveError(f"the archive's files hold more than "
                               f"{max_bytes:,} bytes (at member "
                               f"{_shown(member.name)}); nothing was "
                               "extracted")
        checked.append((parts, member))
    return checked


def extract(archive, destination, max_members=MAX_MEMBERS,
            max_bytes=MAX_BYTES):
    """Checks every member of a tar archive, then extracts them.

    Args:
        archive: the path of a `.tar`, `.tar.gz`, `.tgz`, `.tar.bz2` or
            `.tar.xz` file.
        destination: a folder that does not exist yet; created here.
        max_members: the most members an archive may hold.
        max_bytes: the most bytes its files may hold together.

    Returns:
        The number of files written.

    Raises:
        ArchiveError: a member refused (before anything is written), or an
            archive that is not a whole tar archive.
        OSError: the destination could not be written (a full disk...).
    """
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = []
            # Read header by header: an archive of endless headers is
            # refused once past the bound, not read to its end.
            for member in tar:
                members.append(member)
                if len(members) > max_members:
                    raise _too_many(max_members)
            members = check_members(members, max_members, max_bytes)
            os.mkdir(destination, 0o777)
            return sum(_write(tar, destination, parts, member)
                       for parts, member in members)
    except (tarfile.TarError, EOFError, ValueError) as error:
        if isinstance(error, ArchiveError):
            raise
        text = str(error).strip().splitlines() or [type(error).__name__]
        raise ArchiveError(f"not a whole tar archive ({text[0]})") from None


def _write(tar, destination, parts, member):
    """Writes one checked member; 1 for a file, 0 for a folder."""
    parent = destination
    # Folders are made one level at a time: every level was made by this
    # extraction (the destination is new), so none is a link.
    for part in parts[:-1] if member.isreg() else parts:
        parent = os.path.join(parent, part)
        if not os.path.isdir(parent):
            os.mkdir(parent, 0o777)
    if not member.isreg():
        return 0
    path = os.path.join(parent, parts[-1])
    source = tar.extractfile(member)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                 | getattr(os, "O_NOFOLLOW", 0), 0o666)
    written = 0
    with os.fdopen(fd, "wb") as out:
        for block in iter(lambda: source.read(_CHUNK), b""):
            out.write(block)
            written += len(block)
    if written != member.size:
        raise ArchiveError(
            f"not a whole tar archive (member {_shown(member.name)} holds "
            f"{written:,} of {member.size:,} bytes)")
    return 1


__all__ = ["ArchiveError", "MAX_BYTES", "MAX_MEMBERS", "check_members",
           "extract", "member_path"]
