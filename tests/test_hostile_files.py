"""Special files and `--out` targets: every file the planner reads must be a regular file of
bounded size, and `--out` writes atomically to a regular file, through symbolic links, keeping
the target's mode (or the umask's for a new file) and leaving no temporary file behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hostile_cli import run

from planner.errors import InputError
from planner.schema.files import decode_utf8, read_text, write_atomic

ROOT = Path(__file__).resolve().parent.parent
CHAT = ROOT / "problems" / "chat-70b.yaml"
DEV_ZERO = Path("/dev/zero")
needs_dev_zero = pytest.mark.skipif(not DEV_ZERO.exists(), reason="no /dev/zero here")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")


def special_files(tmp_path: Path) -> dict[str, Path]:
    """A FIFO, a folder, /dev/zero and a link to it, made at test time."""
    found = {"folder": tmp_path / "folder.yaml"}
    found["folder"].mkdir()
    if hasattr(os, "mkfifo"):
        found["fifo"] = tmp_path / "pipe.yaml"
        os.mkfifo(found["fifo"])
    if DEV_ZERO.exists():
        found["dev-zero"] = DEV_ZERO
        found["link-to-dev-zero"] = tmp_path / "zero.yaml"
        found["link-to-dev-zero"].symlink_to(DEV_ZERO)
    return found


KINDS = {
    "folder": "a folder",
    "fifo": "a named pipe",
    "dev-zero": "a character device",
    "link-to-dev-zero": "a character device",
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("command", ["solve", "tco", "sweep", "frontier", "explain", "compare"])
def test_special_file_as_problem(tmp_path: Path, kind: str, command: str) -> None:
    files = special_files(tmp_path)
    if kind not in files:
        pytest.skip(f"no {kind} on this system")
    args = [command, str(files[kind])]
    if command == "sweep":
        args += ["--vary", "constraints.max_devices=1,2"]
    if command == "compare":
        args += [str(CHAT)]
    code, out = run(*args)
    assert code == 2, out
    assert str(files[kind]) in out and KINDS[kind] in out and "not a regular file" in out


@pytest.mark.parametrize("kind", list(KINDS))
def test_special_file_as_model(tmp_path: Path, kind: str) -> None:
    files = special_files(tmp_path)
    if kind not in files:
        pytest.skip(f"no {kind} on this system")
    target = files[kind]
    model = target / "config.json" if kind == "folder" else target
    code, out = run("estimate", "--model", str(model), "--device", "h100-sxm")
    assert code == 2, out
    assert str(model) in out


@needs_dev_zero
def test_special_file_as_measurements() -> None:
    args = ["estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", "--measured", "/dev/zero"]
    code, out = run(*args)
    assert code == 2 and "/dev/zero: a character device" in out


def test_a_large_file_is_read_no_further_than_the_bound(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 5000)
    with pytest.raises(InputError, match="larger than 0 MiB"):
        read_text(big, max_bytes=4096)
    assert read_text(big, max_bytes=5000) == " " * 5000


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope.yaml: no such file"):
        read_text(tmp_path / "nope.yaml")


def test_standard_input_is_named_as_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`planner solve -` read as a file named "-" said "no such file"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"standard input is not supported"):
        read_text(Path("-"))


def test_a_tab_in_yaml_says_to_indent_with_spaces() -> None:
    from planner.schema.yaml_io import parse_text

    with pytest.raises(InputError, match=r"x:3:1: .*replace the tab with spaces"):
        parse_text("name: x\nworkloads:\n\t- name: a\n", "x")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"a: 1\nb: caf\xe9\n", r"x:2:7: cannot read as UTF-8 text: the byte 0xE9"),
        (b"\xef\xbb\xbfa: 1\n\xff", r"x:2:1: cannot read as UTF-8 text: the byte 0xFF"),
        ("a: 1".encode("utf-16-le").join([b"\xff\xfe", b""]), "UTF-16"),
        ("a: 1".encode("utf-16-be").join([b"\xfe\xff", b""]), "UTF-16"),
        (b"\xff\xfe\x00\x00a\x00\x00\x00", "UTF-32"),
    ],
)
def test_encoding_errors_are_located(data: bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        decode_utf8(data, "x")


def test_utf8_bom_is_dropped() -> None:
    assert decode_utf8(b"\xef\xbb\xbfname: x\n", "x") == "name: x\n"


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_out_writes_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(link, "new\n")
    assert link.is_symlink()
    assert real.read_text(encoding="utf-8") == "new\n"
    assert not leftovers(tmp_path)


def test_out_keeps_the_mode_of_the_target(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o640)
    write_atomic(target, "new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_out_honours_the_umask_for_a_new_file(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "plan.json", "x\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "plan.json").stat().st_mode) == 0o640


@pytest.mark.parametrize("kind", ["folder", "fifo", "dev-zero"])
def test_out_refuses_a_non_regular_target(tmp_path: Path, kind: str) -> None:
    files = special_files(tmp_path)
    if kind not in files:
        pytest.skip(f"no {kind} on this system")
    with pytest.raises(InputError, match="not a regular file; --out writes regular files only"):
        write_atomic(files[kind], "x\n")
    assert not leftovers(tmp_path)
    if kind == "fifo":
        assert stat.S_ISFIFO(files[kind].stat().st_mode)  # still a FIFO, not replaced


def test_out_into_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        write_atomic(tmp_path / "nope" / "plan.json", "x\n")


def test_out_removes_its_temporary_file_on_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(InputError, match=r"plan\.json: cannot write: No space left"):
        write_atomic(tmp_path / "plan.json", "x\n")
    assert not leftovers(tmp_path) and not (tmp_path / "plan.json").exists()


def test_out_removes_its_temporary_file_on_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "plan.json", "x\n")
    assert not leftovers(tmp_path)


def test_solve_out_to_a_folder_fails_before_the_solve(tmp_path: Path) -> None:
    code, out = run("solve", str(CHAT), "--out", str(tmp_path))
    assert code == 2 and "a folder, not a regular file" in out
    assert not leftovers(tmp_path)


@pytest.mark.parametrize("command", ["sweep", "frontier"])
def test_rows_out_to_a_folder_fails_before_solving(tmp_path: Path, command: str) -> None:
    args = [command, str(CHAT), "--out", str(tmp_path)]
    if command == "sweep":
        args += ["--vary", "constraints.max_devices=1,2"]
    code, out = run(*args)
    assert code == 2 and "a folder, not a regular file" in out


def test_plot_refuses_a_fifo_before_solving(tmp_path: Path) -> None:
    files = special_files(tmp_path)
    if "fifo" not in files:
        pytest.skip("no named pipes here")
    fifo = tmp_path / "chart.png"
    os.mkfifo(fifo)
    code, out = run("tco", str(CHAT), "--plot", str(fifo))
    assert code == 2 and "a named pipe (FIFO), not a regular file; --plot writes" in out
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_plot_writes_through_a_symlink_with_the_umask(tmp_path: Path) -> None:
    from planner.report.plot import plot_sweep

    real = tmp_path / "real.svg"
    link = tmp_path / "link.svg"
    link.symlink_to(real)
    rows = [{"x": 1, "status": "OPTIMAL", "tco_usd": 1.0, "tokens_per_s": 1.0, "power_w": 1.0}]
    old = os.umask(0o077)
    try:
        plot_sweep(rows, "x", ["tco_usd"], link, title="t")
    finally:
        os.umask(old)
    assert link.is_symlink() and real.read_text(encoding="utf-8").startswith("<?xml")
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert not leftovers(tmp_path)
