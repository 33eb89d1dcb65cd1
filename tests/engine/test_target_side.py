"""The code automl-setup runs in a target environment's interpreter (mcp_server/target_side/):
real modules, standard library only, Python 3.8 syntax, their functions called here directly
and each run by path the way the product runs it; and no product module hands Python source to
`-c` any more."""

from __future__ import annotations

import ast
import errno
import importlib
import importlib.util
import json
import marshal
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from support.engines import WheelInstall

from mcp_server.children.uv import uv_binary
from mcp_server.environment.probe import Probe
from mcp_server.target_side import HERE, command, launcher, probe, startcheck
from mcp_server.target_side import bytecode as pyc_side

PACKAGE = Path(__file__).resolve().parents[2] / "mcp_server"
MODULES = sorted(HERE.glob("*.py"))


# ---- the modules' shape ----------------------------------------------------------------------


def _imported(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import: the script's package is not importable"
            found.add((node.module or "").split(".")[0])
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_each_module_is_python_38_and_standard_library_only(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 8))
    foreign = _imported(tree) - set(sys.stdlib_module_names) - {"__future__"}
    assert foreign == set(), f"{path.name} imports {foreign}: the target has only the stdlib"


def test_the_python_38_check_can_fail() -> None:
    with pytest.raises(SyntaxError):
        ast.parse("match x:\n    case 1:\n        pass\n", feature_version=(3, 8))
    if sys.version_info < (3, 13):  # 3.13's parser no longer flags this one for 3.8
        with pytest.raises(SyntaxError):
            ast.parse("with (open(a) as f, open(b) as g):\n    pass\n", feature_version=(3, 8))


GIT_SETTING = re.compile(r"[A-Za-z][\w.-]*=\S*")


def python_source_to_dash_c(source: str) -> list[int]:
    """Lines of `source` where an argv list or tuple passes anything but a git setting
    (`-c name=value`) after a `-c`: Python source handed to an interpreter."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.List | ast.Tuple):
            for here, after in zip(node.elts, node.elts[1:], strict=False):
                if isinstance(here, ast.Constant) and here.value == "-c":
                    value = after.value if isinstance(after, ast.Constant) else None
                    if not (isinstance(value, str) and GIT_SETTING.fullmatch(value)):
                        found.append(node.lineno)
    return found


def test_no_product_module_passes_python_source_to_dash_c() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "reference_engine" not in path.relative_to(PACKAGE).parts
        for line in python_source_to_dash_c(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_dash_c_scan_finds_each_form_it_replaced() -> None:
    assert python_source_to_dash_c('argv = [py, "-I", "-B", "-c", _PROBE]') == [1]
    assert python_source_to_dash_c('run([py, "-c", "import sys; print(sys.prefix)"])') == [1]
    assert python_source_to_dash_c('argv = ["git", "-c", "gc.auto=0", *args]') == []


def test_command_runs_the_module_by_path_isolated_and_writing_nothing() -> None:
    argv = command(Path("/env/bin/python"), "probe", "{}")
    assert argv[:3] == ["/env/bin/python", "-I", "-B"]
    assert Path(argv[3]) == HERE / "probe.py" and Path(argv[3]).is_file()
    assert argv[4:] == ["{}"]


def test_the_scripts_folder_is_not_on_the_scripts_import_path(tmp_path: Path) -> None:
    done = subprocess.run(
        command(Path(sys.executable), "prefix"), capture_output=True, text=True, check=True
    )
    assert done.stdout == f"{sys.prefix}\n"
    # The same isolation with a planted module beside a script: `-I` leaves it unimported.
    (tmp_path / "json.py").write_text("raise SystemExit('shadowed')\n", encoding="utf-8")
    script = tmp_path / "uses_json.py"
    script.write_text("import json\nprint(json.dumps(1))\n", encoding="utf-8")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    isolated = subprocess.run(
        [sys.executable, "-I", "-B", str(script)], capture_output=True, text=True
    )
    assert plain.returncode != 0 and "shadowed" in plain.stderr  # the danger is real
    assert isolated.returncode == 0 and isolated.stdout == "1\n"


# ---- probe ----------------------------------------------------------------------------------


def test_probe_answers_what_the_strict_model_reads() -> None:
    answer = probe.probe(["pytest", "no-such-distribution"], ["json", "no_such_module"])
    read = Probe.model_validate_json(json.dumps(answer))
    assert read.prefix == Path(sys.prefix) and read.executable == sys.executable
    assert read.dists["no-such-distribution"] is None
    pytest_dist = read.dists["pytest"]
    assert pytest_dist is not None and pytest_dist.version == metadata.version("pytest")
    assert "pytest" in pytest_dist.console_scripts
    assert read.modules == {"json": True, "no_such_module": False}
    assert read.versions["pydantic"] == metadata.version("pydantic")


def test_probe_markers_are_packagings_own() -> None:
    assert probe.markers() == default_environment()


def test_probe_reads_torchs_cuda_build_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert importlib.util.find_spec("torch") is None or pytest.skip("a real torch is installed")
    assert probe.torch_cuda() is None
    torch = tmp_path / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text("raise SystemExit('torch imported')\n", encoding="utf-8")
    (torch / "version.py").write_text("cuda: Optional[str] = '12.4'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert probe.torch_cuda() == "12.4"
    (torch / "version.py").write_text("cuda = None\n", encoding="utf-8")
    assert probe.torch_cuda() is None


def test_probe_run_by_path_in_the_interpreter() -> None:
    names = json.dumps({"dists": ["pytest"], "modules": []})
    done = subprocess.run(
        command(Path(sys.executable), "probe", names), capture_output=True, text=True, check=True
    )
    assert Probe.model_validate_json(done.stdout).dists["pytest"] is not None


# ---- launcher and start check: a distribution of our own on the import path ------------------


DEMO = "demo_engine_cli"


def plant_demo(site: Path) -> None:
    """A distribution `demo-engine` with two console scripts into the folder `site`."""
    info = site / "demo_engine-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo-engine\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[console_scripts]\ndemo = {DEMO}:main\nodd = {DEMO}:main [extra]\n", encoding="utf-8"
    )
    (site / f"{DEMO}.py").write_text(
        "import sys\ndef main():\n    print('args', sys.argv)\n    return 7\n", encoding="utf-8"
    )


@pytest.fixture
def demo_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    plant_demo(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop(DEMO, None)


def test_launcher_finds_only_a_plain_console_script(demo_dist: Path) -> None:
    found = launcher.entry_point("demo-engine", "demo")
    assert found is not None and found.value == f"{DEMO}:main"
    assert launcher.entry_point("demo-engine", "odd") is None  # not a plain module:function
    assert launcher.entry_point("demo-engine", "absent") is None
    assert launcher.entry_point("no-such-distribution", "demo") is None


def test_launcher_calls_the_entry_point_with_its_arguments(
    demo_dist: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the launcher sets the engine's argv
    assert launcher.main(["launcher.py", "demo-engine", "demo", "run", "--approve"]) == 7
    assert capsys.readouterr().out == "args ['demo', 'run', '--approve']\n"
    refused = launcher.main(["launcher.py", "demo-engine", "odd"])
    assert refused == (
        "automl-setup: demo-engine has no console script 'odd' with a plain module:function "
        "entry point in this environment"
    )


def test_launcher_run_by_path_in_a_venv_exits_with_the_engines_status(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    names = json.dumps({"dists": [], "modules": []})
    site = subprocess.run(
        command(python, "probe", names), capture_output=True, text=True, check=True
    )
    plant_demo(Path(json.loads(site.stdout)["purelib"]))
    argv = command(python, "launcher", "demo-engine", "demo", "run", "--approve")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (7, "args ['demo', 'run', '--approve']\n")
    refused = subprocess.run(
        command(python, "launcher", "demo-engine", "odd"), capture_output=True, text=True
    )
    assert refused.returncode == 1 and "no console script 'odd'" in refused.stderr
    # Only the environment counts: PYTHONPATH (ignored under -I) cannot lend a distribution.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant_demo(elsewhere)
    env = {**os.environ, "PYTHONPATH": str(elsewhere)}
    argv = command(Path(sys.executable), "launcher", "demo-engine", "demo")
    other = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert other.returncode == 1 and "no console script 'demo'" in other.stderr


def test_start_check_loads_each_console_script(demo_dist: Path) -> None:
    assert startcheck.load_console_scripts("demo-engine") == 2
    (demo_dist / f"{DEMO}.py").write_text("raise ImportError('cut short')\n", encoding="utf-8")
    sys.modules.pop(DEMO, None)
    importlib.invalidate_caches()
    with pytest.raises(ImportError, match="cut short"):
        startcheck.load_console_scripts("demo-engine")


# ---- bytecode -------------------------------------------------------------------------------


@pytest.fixture
def source(tmp_path: Path) -> str:
    path = tmp_path / "pkg" / "mod.py"
    path.parent.mkdir()
    path.write_text("VALUE = 1\n", encoding="utf-8")
    return str(path)


def test_compile_writes_missing_bytecode_once(source: str) -> None:
    assert pyc_side.compile_missing([source]) == {"compiled": 1}
    pyc = importlib.util.cache_from_source(source)
    with open(pyc, "rb") as f:
        data = f.read()
    assert pyc_side.loaded(source, data)
    assert marshal.loads(data[16:]) == compile(b"VALUE = 1\n", source, "exec", dont_inherit=True)
    assert pyc_side.compile_missing([source]) == {"compiled": 0}  # up to date: left alone
    assert not [p for p in Path(pyc).parent.iterdir() if p.suffix == ".tmp"]


def test_compile_skips_a_file_that_does_not_compile(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n", encoding="utf-8")
    assert pyc_side.compile_missing([str(broken)]) == {"compiled": 0}
    assert not (tmp_path / "__pycache__").exists()


def test_compile_reports_the_write_that_failed(source: str) -> None:
    # __pycache__ a file: its folder cannot be made (as root, a mode would not stop us).
    Path(source).with_name("__pycache__").write_text("", encoding="utf-8")
    answer = pyc_side.compile_missing([source])
    assert answer["compiled"] == 0
    code, strerror, filename = answer["error"]
    assert (code, filename) == (errno.EEXIST, str(Path(source).with_name("__pycache__")))
    assert strerror == os.strerror(errno.EEXIST)


def test_a_whole_write_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "in-the-way"
    target.mkdir()
    (target / "keep").write_text("", encoding="utf-8")
    with pytest.raises(OSError):
        pyc_side.write_whole(str(target), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in-the-way"]


def test_check_names_bytecode_python_would_load_that_is_not_its_source(source: str) -> None:
    pyc_side.compile_missing([source])
    pyc = importlib.util.cache_from_source(source)
    assert pyc_side.stray([source], []) == []  # compiled from its source: passes
    with open(pyc, "rb") as f:
        header = f.read(16)
    other = marshal.dumps(compile("VALUE = 2\n", source, "exec", dont_inherit=True))
    Path(pyc).write_bytes(header + other)
    assert pyc_side.stray([source], []) == [
        [pyc, "not compiled from its source: Python runs it instead"]
    ]
    assert pyc_side.stray([source], [pyc]) == []  # a RECORD lists it: not ours to judge
    Path(pyc).write_bytes(header + other[:5])
    ((_, problem),) = pyc_side.stray([source], [])
    assert problem.startswith("cut short or damaged (")
    Path(pyc).write_bytes(b"\0" * 16 + other)  # another magic number: Python ignores it
    assert pyc_side.stray([source], []) == []


def test_both_jobs_run_by_path_in_the_interpreter(source: str) -> None:
    python = Path(sys.executable)
    compiled = subprocess.run(
        command(python, "bytecode", "compile"), input=json.dumps([source]),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(compiled.stdout) == {"compiled": 1}
    checked = subprocess.run(
        command(python, "bytecode", "check"),
        input=json.dumps({"sources": [source], "recorded": []}),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(checked.stdout) == []
    wrong = subprocess.run(command(python, "bytecode", "other"), capture_output=True, text=True)
    assert wrong.returncode == 2 and "usage: bytecode.py compile|check" in wrong.stderr


# ---- as a user installs automl-setup ---------------------------------------------------------

INSTALLED = """
import sys
from pathlib import Path
from mcp_server.environment.target import prefix_of
from mcp_server.target_side import command
print(command(Path(sys.executable), "launcher")[3])
print(prefix_of(Path(sys.executable)))
"""


@pytest.mark.slow
def test_the_wheel_carries_every_script_and_runs_them_where_it_is_installed(
    wheel_install: WheelInstall,
) -> None:
    with zipfile.ZipFile(wheel_install.wheel) as wheel:
        names = set(wheel.namelist())
    assert {f"mcp_server/target_side/{p.name}" for p in MODULES} <= names
    python = wheel_install.script("python")
    done = subprocess.run(
        [python, "-I", "-c", INSTALLED], capture_output=True, text=True, check=True, cwd="/"
    )
    launcher_path, prefix = done.stdout.splitlines()
    assert Path(launcher_path).is_file()
    assert Path(launcher_path).is_relative_to(wheel_install.venv.resolve())
    assert Path(prefix) == wheel_install.venv
