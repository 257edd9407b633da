"""Files that are not what they should be, read: one line on stderr, exit 2, nothing written, no
hang, bounded memory.

* configuration files (`settings.json`, `models.json`, `auth.json`) that are a FIFO, a
  directory or a link to /dev/zero; a `settings.json` with a byte that is not UTF-8; models.json
  fields of the wrong type;
* `store import` of a FIFO, /dev/zero, a directory, a 2 GB file of NULs;
* a 2 GB file of NULs (or one whose first line is not a header, followed by 2 GB) given to every
  read command and to `sessions --dir`: refused after reading at most the first 1 MiB;
* `sessions` and id lookups do not follow a symbolic link out of the session directory.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_files import HEADER, entry, run_cli, user, write_session

GIB = 1024**3
READ_COMMANDS = (["show"], ["tree"], ["context"], ["context", "--json"], ["stats"], ["tokens"], ["dropped"],
                 ["compact", "--dry-run"], ["export", "-o", "{out}"])


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 * GIB, 2 * GIB))


def picontext(*argv: str, home: Path, cwd: Path, timeout: float = 60,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A subprocess held to 2 GB of address space and a timeout: a FIFO would block an in-process
    reader forever, and /dev/zero never ends."""
    full = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    full.update({"PICONTEXT_DIR": str(home), **(env or {})})
    return subprocess.run([sys.executable, "-m", "picontext", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=_limit_memory, env=full)


def one_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("picontext: "), result.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _not_a_file(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")


# --- configuration files ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "directory", "dev-zero"])
def test_a_settings_file_that_is_not_a_file_is_one_line(kind: str, home: Path, session: Path,
                                                        tmp_path: Path) -> None:
    _not_a_file(home / "settings.json", kind)
    one_line(picontext("compact", "--dry-run", str(session), home=home, cwd=tmp_path), "settings.json",
             "not a regular file")


def test_a_project_settings_fifo_is_one_line(home: Path, session: Path, tmp_path: Path) -> None:
    (tmp_path / ".picontext").mkdir()
    os.mkfifo(tmp_path / ".picontext" / "settings.json")
    one_line(picontext("compact", "--dry-run", str(session), home=home, cwd=tmp_path), "a FIFO")


@pytest.mark.parametrize("name", ["models.json", "auth.json"])
def test_models_and_auth_files_that_are_fifos_are_one_line(name: str, home: Path, tmp_path: Path) -> None:
    os.mkfifo(home / name)
    argv = ["models", "list"] if name == "models.json" else ["auth", "list"]
    one_line(picontext(*argv, home=home, cwd=tmp_path), name, "a FIFO")


def test_a_settings_byte_that_is_not_utf8_reads_as_pi_reads_it(home: Path, session: Path, tmp_path: Path) -> None:
    """Node decodes it as U+FFFD: inside a string it is harmless, outside it is bad JSON."""
    (home / "settings.json").write_bytes(b'{"note": "caf\xe9", "compaction": {"keepRecentTokens": 7}}')
    result = run_cli("compact", "--dry-run", "--json", str(session))
    # read, not refused: its keepRecentTokens decides (a one-entry session has nothing to compact)
    assert result.code == 2 and "keepRecentTokens (7)" in result.err, result.err
    (home / "settings.json").write_bytes(b'{"compaction": \xff}')
    result = run_cli("compact", "--dry-run", str(session))
    assert result.code == 2 and len(result.err.splitlines()) == 1, result.err
    assert "settings.json: not valid JSON" in result.err


@pytest.mark.parametrize(("model", "says"), [
    ({"id": "m", "contextWindow": "big"}, '"contextWindow" must be a positive whole number, not "big"'),
    ({"id": "m", "maxTokens": {}}, '"maxTokens" must be a positive whole number, not {}'),
    ({"id": "m", "contextWindow": 1e400}, '"contextWindow" must be a positive whole number'),
    ({"id": "m", "cost": {"input": "1"}}, 'cost: "input" must be a number, 0 or more, not "1"'),
    ({"id": "m", "cost": 3}, '"cost" must be an object, not 3'),
    ({"id": "m", "input": "text"}, '"input" must be a list of strings'),
    ({"id": "m", "reasoning": "yes"}, '"reasoning" must be true or false'),
    ({"id": "m", "headers": ["x"]}, '"headers" must be an object'),
    ("m", '"models" must be a list of model objects, not ["m"]'),
])
def test_models_json_fields_of_the_wrong_type_are_one_line(model: object, says: str, home: Path) -> None:
    provider = {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "models": [model]}
    (home / "models.json").write_text(json.dumps({"providers": {"local": provider}}))
    result = run_cli("models", "list")
    assert result.code == 2 and len(result.err.splitlines()) == 1, result.err
    assert says in result.err and "models.json" in result.err


def test_models_json_models_that_are_not_a_list_are_one_line(home: Path) -> None:
    for data in ({"models": "m"}, {"providers": {"p": {"baseUrl": "http://h", "models": "m"}}}):
        (home / "models.json").write_text(json.dumps(data))
        result = run_cli("models", "list")
        assert result.code == 2 and len(result.err.splitlines()) == 1, result.err
        assert '"models" must be a list of model objects, not "m"' in result.err


# --- huge files that are not sessions ---------------------------------------------------------


@pytest.fixture
def zeros(tmp_path: Path) -> Path:
    """2 GB of NULs without a newline (sparse: it takes no disk)."""
    path = tmp_path / "zeros.jsonl"
    with open(path, "wb") as f:
        f.truncate(2 * GIB)
    return path


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=" ".join)
def test_a_2gb_file_of_nuls_is_refused_after_a_bounded_read(argv: list[str], zeros: Path, home: Path,
                                                            tmp_path: Path) -> None:
    args = [a.replace("{out}", str(tmp_path / "o.html")) for a in argv]
    result = picontext(*args, str(zeros), home=home, cwd=tmp_path)
    one_line(result, "not a session file (no session header in its first 1 MiB)", str(zeros))
    assert not (tmp_path / "o.html").exists()


def test_a_file_whose_first_line_is_not_a_header_is_refused_before_the_rest(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "message-first.jsonl"
    with open(path, "wb") as f:
        f.write(json.dumps(entry("a", None, type="message", message=user("hi"))).encode() + b"\n")
        f.truncate(2 * GIB)
    for argv in (["context", "--json"], ["show"]):
        one_line(picontext(*argv, str(path), home=home, cwd=tmp_path), "its first line is not a session header")


def test_sessions_lists_around_a_2gb_file_of_nuls(zeros: Path, home: Path, tmp_path: Path) -> None:
    write_session(tmp_path / "good.jsonl", [HEADER, entry("a", None, type="message", message=user("fine"))])
    result = picontext("sessions", "--all", "--json", "--dir", str(tmp_path), home=home, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [row["firstMessage"] for row in json.loads(result.stdout)] == ["fine"]


def test_a_session_with_a_large_entry_still_loads(tmp_path: Path) -> None:
    """Only the header must be found in the first 1 MiB: a 3 MiB entry after it is fine."""
    big = "x" * (3 * 1024 * 1024)
    path = write_session(tmp_path / "big.jsonl", [HEADER, entry("a", None, type="message", message=user(big))])
    result = run_cli("context", "--json", str(path))
    assert result.code == 0, result.err
    assert json.loads(result.out)["messages"][0]["content"] == big


def test_a_header_after_a_megabyte_of_junk_is_not_looked_for(tmp_path: Path) -> None:
    """A divergence (docs/divergences.md): Pi would read on; such a file is not listed by Pi either."""
    path = tmp_path / "late.jsonl"
    path.write_bytes(b"junk\n" * 300_000 + json.dumps(HEADER).encode() + b"\n")
    result = run_cli("show", str(path))
    assert result.code == 2 and "no session header in its first 1 MiB" in result.err, result.err


# --- store import -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "directory", "dev-zero", "zeros"])
def test_store_import_of_what_is_not_a_session_file(kind: str, pg_url: str, home: Path, tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    if kind == "zeros":
        with open(path, "wb") as f:
            f.truncate(2 * GIB)
    else:
        _not_a_file(path, kind)
    result = picontext("store", "import", str(path), home=home, cwd=tmp_path, env={"PICONTEXT_STORE": pg_url})
    line = one_line(result, str(path))
    assert ("not a valid pi session" in line) if kind == "zeros" else ("not a regular file" in line)
    listed = picontext("sessions", "--all", "--json", home=home, cwd=tmp_path, env={"PICONTEXT_STORE": pg_url})
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


# --- links out of the session directory ---------------------------------------------------------


def test_sessions_does_not_follow_a_link_out_of_its_directory(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = write_session(outside / "secret.jsonl", [{**HEADER, "id": "5ec12e7"},
                                                      entry("a", None, type="message", message=user("secret"))])
    folder = tmp_path / "folder"
    folder.mkdir()
    write_session(folder / "mine.jsonl", [{**HEADER, "id": "aaaa1111"},
                                          entry("a", None, type="message", message=user("mine"))])
    (folder / "link-out.jsonl").symlink_to(secret)
    (folder / "link-in.jsonl").symlink_to(folder / "mine.jsonl")
    result = run_cli("sessions", "--all", "--json", "--dir", str(folder))
    assert result.code == 0, result.err
    assert sorted(row["firstMessage"] for row in json.loads(result.out)) == ["mine", "mine"]
    # Under PICONTEXT_DIR: a project directory that is a link out, and a file linked out.
    root = home / "sessions"
    (root / "--p--").mkdir(parents=True)
    (root / "--p--" / "link.jsonl").symlink_to(secret)
    (root / "--elsewhere--").symlink_to(outside, target_is_directory=True)
    result = run_cli("sessions", "--all", "--json")
    assert result.code == 0 and json.loads(result.out) == [], result.out
    lookup = run_cli("show", "5ec12e7")
    assert lookup.code == 2 and "no session with id '5ec12e7'" in lookup.err, lookup.err


def test_continue_does_not_pick_a_link_out_of_the_session_directory(home: Path, tmp_path: Path) -> None:
    from picontext.session import paths
    from picontext.session.listing import find_most_recent_session

    directory = Path(paths.default_session_dir(str(tmp_path), create=True))
    mine = write_session(directory / "mine.jsonl", [{**HEADER, "cwd": str(tmp_path)},
                                                    entry("a", None, type="message", message=user("mine"))])
    outside = write_session(tmp_path / "secret.jsonl", [{**HEADER, "id": "s2", "cwd": str(tmp_path)},
                                                        entry("a", None, type="message", message=user("secret"))])
    (directory / "newest.jsonl").symlink_to(outside)
    os.utime(mine, (1_000_000, 1_000_000))  # the link's target is the most recent file
    assert find_most_recent_session(str(directory)) == str(mine)


def test_a_settings_file_over_16_mib_is_not_read(home: Path, session: Path) -> None:
    with open(home / "settings.json", "wb") as f:
        f.truncate(17 * 1024 * 1024)
    result = run_cli("compact", "--dry-run", str(session))
    assert result.code == 2 and len(result.err.splitlines()) == 1, result.err
    assert "settings.json is larger than 16 MiB" in result.err
