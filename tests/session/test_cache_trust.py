"""Caches that cannot lie (issue 19): whatever happens to the listing index (`.idx`) and the entry
columns (`.cols`), or to the session file behind their back, every command answers exactly what it
answers with no cache at all (`PICONTEXT_INDEX=0`: everything from the file).

* random bit flips at random places in either cache file (the checksum refuses the file);
* crafted edits that keep the file well-formed: a parent column pointing further back (the
  context would silently lose entries), another name, another first message;
* the session file rewritten in place with the same size and its mtime put back (`touch -r`):
  right after a write (the cache is "racy" and checked against every byte), later (the ctime
  moved), and on a filesystem whose ctime never moves (the two ends of the covered bytes).

The commands are run in this process (`tests/cli/inprocess.py`); `context --json` and `sessions`
read the caches, `tokens` and `show` read the file, and all four must agree with the no-cache run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from picontext.session import jsonl_columns, jsonl_index

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "cli"))
from inprocess import run_main  # noqa: E402

import gen_realistic  # noqa: E402

NAME = b"refactor the request handlers"  # gen_realistic's session name
COMMANDS = (("context", "--json"), ("sessions", "--all", "--json"), ("tokens", "--json"), ("show", "--width", "120"))
KINDS = ("idx", "cols")
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
REWRITES = settings(SETTINGS, max_examples=15)  # each example runs the four commands three or four times


class World:
    """One realistic session under PICONTEXT_DIR, its answers without a cache, and the cache files
    a first run wrote."""

    def __init__(self, home: Path) -> None:
        directory = home / "sessions" / "--home-u-proj--"
        directory.mkdir(parents=True)
        self.path = directory / "2026-03-01T10-00-00-000Z_0199aa00-0000-7000-8000-0000realistic.jsonl"
        gen_realistic.generate(str(self.path), 320, seed=5)
        self.original = self.path.read_bytes()
        self.mtime_ns = os.stat(self.path).st_mtime_ns
        real = os.path.realpath(self.path)
        self.cache = {"idx": Path(jsonl_index.index_path(real)), "cols": Path(jsonl_columns.columns_path(real))}
        self.truth = self.answers(cache=False)
        assert self.answers() == self.truth
        self.good = {kind: path.read_bytes() for kind, path in self.cache.items()}

    def answers(self, *, cache: bool = True, before: Any = None) -> list[tuple[int, str, str]]:
        """Each command's (exit code, stdout, stderr); `before()` runs before each command (to put
        a damaged cache back: the command before it may have rebuilt it)."""
        env = {**os.environ, "PICONTEXT_INDEX": "1" if cache else "0"}
        out = []
        for command in COMMANDS:
            if before is not None:
                before()
            args = command if command[0] == "sessions" else (*command, str(self.path))
            result = run_main(*args, env=env)
            out.append((result.returncode, result.stdout, result.stderr))
        return out

    def rewrite(self, data: bytes) -> None:
        """The session file's content replaced in place (same inode), its mtime put back."""
        assert len(data) == len(self.original)
        with open(self.path, "r+b") as f:
            f.write(data)
        os.utime(self.path, ns=(os.stat(self.path).st_atime_ns, self.mtime_ns))


@pytest.fixture
def world() -> World:
    return World(Path(os.environ["PICONTEXT_DIR"]))


@contextlib.contextmanager
def clock(later: bool) -> Iterator[None]:
    """With `later`, every cache check happens as if well after the file's last write (see
    tests/session/conftest.py `settled`); else at the real time."""
    with pytest.MonkeyPatch.context() as mp:
        if later:
            mp.setattr(jsonl_index, "clock_ns", lambda: time.time_ns() + jsonl_index.RACY_NS + 1_000_000_000)
        yield


def _flip(data: bytes, flips: list[tuple[float, int]]) -> bytes:
    out = bytearray(data)
    for where, bit in flips:
        out[min(int(where * len(out)), len(out) - 1)] ^= 1 << bit
    return bytes(out)


@SETTINGS
@given(kind=st.sampled_from(KINDS), later=st.booleans(),
       flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)), min_size=1, max_size=4))
def test_bit_flips_in_a_cache_file_never_change_an_answer(world: World, kind: str, later: bool,
                                                          flips: list[tuple[float, int]]) -> None:
    damaged = _flip(world.good[kind], flips)
    if damaged == world.good[kind]:
        return  # two flips of the same bit
    with clock(later):
        assert world.answers(before=lambda: world.cache[kind].write_bytes(damaged)) == world.truth


def _payload(raw: bytes) -> list[Any]:
    """A cache file's fields, in order (msgpack arrays), wherever its payload starts."""
    for start in range(0, 64):
        with contextlib.suppress(msgspec.DecodeError):
            fields = msgspec.msgpack.decode(raw[start:])
            if isinstance(fields, list) and len(fields) > 8:
                return fields
    raise AssertionError("no msgpack payload found")


def _shorter_path(raw: bytes) -> bytes:
    """The columns with one parent on the leaf's path pointing 18 entries further back along it: a
    well-formed cache (parents still point backwards) whose context silently lacks 17 entries."""
    fields = _payload(raw)
    ids, parents = fields[-1], fields[-4]
    assert len(parents) == 4 * len(ids)
    parent_of = [int.from_bytes(parents[i : i + 4], sys.byteorder, signed=True) for i in range(0, len(parents), 4)]
    path, at = [], len(ids) - 1
    while at >= 0:
        path.append(at)
        at = parent_of[at]
    child, new_parent = path[10], path[28]  # path runs leaf -> root
    where = raw.find(parents) + 4 * child
    return raw[:where] + new_parent.to_bytes(4, sys.byteorder, signed=True) + raw[where + 4 :]


def _other_first_message(raw: bytes) -> bytes:
    first = _payload(raw)[-3].encode()
    assert raw.count(first) == 1
    return raw.replace(first, first.upper())


CRAFTED = {
    "a parent column": ("cols", _shorter_path),
    "the name": ("idx", lambda raw: raw.replace(NAME, NAME.upper())),
    "the first message": ("idx", _other_first_message),
}


@pytest.mark.parametrize("later", [True, False], ids=["later", "now"])
@pytest.mark.parametrize("edit", sorted(CRAFTED))
def test_a_crafted_edit_of_a_cache_never_changes_an_answer(world: World, edit: str, later: bool) -> None:
    kind, craft = CRAFTED[edit]
    crafted = craft(world.good[kind])
    assert crafted != world.good[kind] and len(crafted) == len(world.good[kind])
    with clock(later):
        assert world.answers(before=lambda: world.cache[kind].write_bytes(crafted)) == world.truth


def test_the_crafted_edits_would_change_the_answers(world: World) -> None:
    """(The edits above are ones a cache without a checksum would answer from: each one, with the
    checksum made to match, changes what `context --json` or `sessions` prints.)"""
    for kind, craft in CRAFTED.values():
        crafted = craft(world.good[kind])
        payload = crafted[len(jsonl_index._MAGIC) + jsonl_index._SUM :]
        jsonl_index.write_cache_file(str(world.cache[kind]), payload)  # resealed: a valid cache
        with clock(True):
            assert world.answers() != world.truth, kind
        world.cache[kind].write_bytes(world.good[kind])


def _same_size_edit(data: bytes, where: float, text: bytes) -> bytes:
    """`text` written over the bytes at `where` (a fraction of the file), never over a newline, so
    the file keeps its size and its line breaks (an edit an editor saving in place might make)."""
    at = min(int(where * len(data)), len(data) - len(text) - 1)
    piece = bytes(b if data[at + i] != 0x0A else 0x0A for i, b in enumerate(text))
    return data[:at] + piece + data[at + len(piece) :]


EDIT_TEXT = st.binary(min_size=1, max_size=12).map(lambda b: bytes(0x61 + x % 26 for x in b)) | st.sampled_from(
    [b'"parentId":"00000', b'"role":"assistant"', b'"type":"label"', b'"name":"x"', b"0"])


def _settle_edit(world: World) -> None:
    """Every cache is recorded and the file's clock has moved past the file's last change: a write
    from now on gets a new ctime. (Waits for the filesystem's clock, not for a duration.)"""
    with clock(True):
        assert world.answers() == world.truth
    changed = os.stat(world.path).st_ctime_ns
    probe = world.path.parent / "probe"
    while True:
        probe.write_bytes(b"x")
        if os.stat(probe).st_ctime_ns > changed:
            break
    probe.unlink()


def _restore(world: World, later: bool) -> None:
    """The original content back in place, and the caches checked against it again (recorded as
    of `clock(later)`)."""
    world.rewrite(world.original)
    with clock(later):
        assert world.answers() == world.truth


@REWRITES
@given(where=st.floats(0, 1), text=EDIT_TEXT, later=st.booleans())
def test_a_same_size_rewrite_with_the_mtime_put_back_is_never_served_from_the_cache(
        world: World, where: float, text: bytes, later: bool) -> None:
    """Right after a write (`later` False: the cache was recorded racily, so every byte is checked)
    and later (the ctime moved): an edit anywhere in the file."""
    _restore(world, later)
    if later:
        _settle_edit(world)
    edited = _same_size_edit(world.original, where, text)
    world.rewrite(edited)
    truth = world.answers(cache=False)
    with clock(later):
        assert world.answers() == truth


@contextlib.contextmanager
def filesystem_times(ctime: Any, mtime: Any = None) -> Iterator[None]:
    """A filesystem whose stat reports `ctime(st_ctime_ns)` as the ctime and `mtime(st_mtime_ns)`
    as the mtime: every fstat goes through it."""
    real = os.fstat

    def fstat(fd: int) -> os.stat_result:
        st_ = real(fd)
        changed = ctime(st_.st_ctime_ns)
        modified = st_.st_mtime_ns if mtime is None else mtime(st_.st_mtime_ns)
        fields = {"st_atime": st_.st_atime, "st_atime_ns": st_.st_atime_ns, "st_mtime": modified / 1e9,
                  "st_mtime_ns": modified, "st_ctime": changed / 1e9, "st_ctime_ns": changed,
                  "st_blksize": st_.st_blksize, "st_blocks": st_.st_blocks, "st_rdev": st_.st_rdev}
        return os.stat_result((*st_[:8], modified // 10**9, changed // 10**9), fields)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fstat", fstat)
        yield


def ctime_stands_still() -> contextlib.AbstractContextManager[None]:
    """A ctime that says nothing about writes (Linux's FAT driver reports the mtime as the ctime,
    so putting the mtime back puts it back too): here, one that never moves."""
    return filesystem_times(lambda ns: 1_700_000_000_000_000_000)


def coarse_times() -> contextlib.AbstractContextManager[None]:
    """Timestamps in 2-second steps (FAT's; older kernels tick local filesystems' in milliseconds):
    two writes within one step get the same mtime and ctime."""
    def step(ns: int) -> int:
        return ns - ns % 2_000_000_000

    return filesystem_times(step, step)


@REWRITES
@given(where=st.floats(0, 1), text=EDIT_TEXT)
def test_where_timestamps_are_coarse_an_edit_right_after_a_write_is_still_seen(
        world: World, where: float, text: bytes) -> None:
    """The edit lands in the same 2-second step as the write before it, so the ctime the cache
    recorded is the edited file's too; but that cache was recorded less than RACY_NS after the
    ctime, so every covered byte is checked."""
    with coarse_times():
        world.rewrite(world.original)
        with clock(False):
            for command in (("context", "--json", str(world.path)), ("sessions", "--all", "--json")):
                run_main(*command)  # caches recorded right after the write
        world.rewrite(_same_size_edit(world.original, where, text))
        truth = world.answers(cache=False)
        with clock(False):
            assert world.answers() == truth


@REWRITES
@given(at_end=st.booleans(), where=st.floats(0, 1), text=EDIT_TEXT)
def test_where_the_ctime_stands_still_an_edit_of_either_end_is_still_seen(
        world: World, at_end: bool, where: float, text: bytes) -> None:
    """The two ends of the covered bytes (the header and first entries, the last entries) are
    compared on every warm call: an edit there with the mtime put back is seen even where the
    ctime says nothing (in the middle only the ctime or a racy check would see it: docs/storage.md)."""
    with ctime_stands_still():
        _restore(world, True)
        span = jsonl_index.ENDS - len(text) - 1
        start = len(world.original) - jsonl_index.ENDS if at_end else 0
        edited = _same_size_edit(world.original, (start + where * span) / len(world.original), text)
        world.rewrite(edited)
        truth = world.answers(cache=False)
        with clock(True):
            assert world.answers() == truth


def test_a_cache_file_that_is_a_fifo_never_blocks(world: World) -> None:
    def fifos() -> None:
        for path in world.cache.values():
            path.unlink(missing_ok=True)
            os.mkfifo(path)

    assert world.answers(before=fifos) == world.truth


def test_a_huge_cache_file_is_not_read(world: World) -> None:
    """4 GiB (sparse) where the columns should be, and a process that could not hold them: the
    file is refused by its size before anything is read."""
    import resource
    import subprocess

    with open(world.cache["cols"], "r+b") as f:
        f.truncate(4 << 30)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    result = subprocess.run([sys.executable, "-m", "picontext", "context", str(world.path), "--json"],
                            capture_output=True, text=True, preexec_fn=limited, timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == world.truth[0]
