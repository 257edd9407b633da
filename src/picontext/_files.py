"""Opening a file a user named, which may be anything: the one place that refuses what is not a
regular file before it is opened (opening a FIFO for reading blocks until a writer comes, and
`/dev/zero` never ends), and that bounds how much of a file is read.

Session files, configuration files (`settings.json`, `models.json`, `auth.json`) and the files of
`store import` all come through here.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from picontext.errors import ConfigError

CONFIG_LIMIT: Final = 16 * 1024 * 1024  # a settings or models file is a few KiB; this is not one

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """'a FIFO', 'a directory', ... for a mode that is not a regular file's."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a directory or a socket (after symbolic links)."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(f"{path} is {file_kind(mode)}, not a regular file")
        self.path = path
        self.kind = file_kind(mode)


def open_regular(path: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of `path`, only if it is a regular file: checked with stat() before opening
    (so a FIFO never blocks us), then on the descriptor (opened non-blocking: a FIFO swapped in
    between the two cannot block either). FileNotFoundError passes through (unless O_CREAT)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    else:
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, st.st_mode)
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, st.st_mode)
        if flags & os.O_NONBLOCK == 0:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes; `FileTooLarge` beyond."""
    fd = open_regular(path)
    with open(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(path, limit)
    return data


class FileTooLarge(OSError):
    def __init__(self, path: str, limit: int) -> None:
        super().__init__(f"{path} is larger than {limit // (1024 * 1024)} MiB")
        self.path = path


def read_config_text(path: str | os.PathLike[str]) -> str | None:
    """A configuration file's text, None when it does not exist; ConfigError (one line naming the
    file) when it is a FIFO, a device or a directory, over 16 MiB, or cannot be read. Bytes that
    are not UTF-8 become U+FFFD, as Node's readFileSync(path, "utf-8") makes them for Pi."""
    where = os.fspath(path)
    try:
        data = read_regular(where, CONFIG_LIMIT)
    except FileNotFoundError:
        return None
    except (NotRegularFile, FileTooLarge) as exc:
        raise ConfigError(f"{exc}: not read") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    return data.decode("utf-8", errors="replace")
