"""Release helpers: this checkout copied (its version raised if asked), built into an sdist
and a wheel as a release would be, a real package index on 127.0.0.1 (pypiserver) to upload
them to with twine, and a private environment for `uv tool` and `uvx` to install them from it.

Nothing here writes into the checkout (the build's version hook rewrites
mcp_server/_version.py in the tree it builds, so builds run in a copy), nor into the user's
home, tool folders or uv tool cache.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from support.cli import REPO_ROOT
from support.remotes import LOOPBACK, free_port, stop_process

from mcp_server.children.uv import uv_binary
from mcp_server.source.profile import tomllib

DISTRIBUTION = "automl-setup"
# The manifests that carry the distribution's version beside pyproject.toml (a test in
# tests/skills/test_skills_sync.py keeps them equal to it).
VERSIONED_MANIFESTS = (
    ".claude-plugin/plugin.json",
    ".claude-plugin/marketplace.json",
    ".codex-plugin/plugin.json",
)
# Where the index sends a client for a project it does not hold (pypiserver's own default,
# named here so that it is visible): the dependencies of automl-setup resolve through it.
FALLBACK_URL = "https://pypi.org/simple/"
INDEX_START_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 300.0


def run_checked(
    argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`argv` as a real process without a terminal; a non-zero exit fails with its output."""
    proc = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
        timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    return proc


def project_version(tree: Path = REPO_ROOT) -> str:
    """The version in `tree`'s pyproject.toml: the one place it is written."""
    return str(tomllib.loads((tree / "pyproject.toml").read_text())["project"]["version"])


def commit_epoch() -> int:
    """The commit time of this checkout's HEAD: the SOURCE_DATE_EPOCH of a release build."""
    out = run_checked(["git", "-C", str(REPO_ROOT), "log", "-1", "--format=%ct"]).stdout
    return int(out.strip())


# --- builds ----------------------------------------------------------------------------------

# What a developer's checkout holds beside its files and a build must leave out: a venv,
# bytecode, the tools' caches (paths the release tests plant in the tree they build).
LITTER = (
    ".venv/lib/python3/site-packages/junk.py",
    "mcp_server/__pycache__/operations.cpython-311.pyc",
    "skills/automl-setup/__pycache__/x.cpython-311.pyc",
    "tests/__pycache__/conftest.cpython-311-pytest-8.pyc",
    ".pytest_cache/v/cache/lastfailed",
    ".ruff_cache/0.6.0/123",
)


@dataclass(frozen=True)
class ReleaseDists:
    """An sdist and a wheel built from `tree` at SOURCE_DATE_EPOCH `epoch`; `build` is what
    they say they are (`--version`, serverInfo): the version and the tree's commit."""

    tree: Path
    sdist: Path
    wheel: Path
    version: str
    epoch: int
    build: str


def plant_litter(tree: Path) -> None:
    """Put LITTER into `tree`, as a developer's checkout has it."""
    for rel in LITTER:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_bytes(b"litter\n")


def _build_env(epoch: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["SOURCE_DATE_EPOCH"] = str(epoch)
    return env


def _uv_build(source: Path, out: Path, epoch: int, *kinds: str) -> None:
    argv = [uv_binary(), "build", *kinds, "--python", sys.executable, "--out-dir", str(out)]
    run_checked([*argv, str(source)], env=_build_env(epoch), cwd=out.parent)


def build_dists(tree: Path, out: Path, epoch: int) -> tuple[Path, Path]:
    """The sdist and the wheel of the source tree `tree`, each built from the tree itself
    (`uv build --sdist --wheel`, SOURCE_DATE_EPOCH=epoch) into `out`: (sdist, wheel)."""
    out.mkdir(parents=True, exist_ok=True)
    _uv_build(tree, out, epoch, "--sdist", "--wheel")
    (sdist,) = out.glob("automl_setup-*.tar.gz")
    (wheel,) = out.glob("automl_setup-*.whl")
    return sdist, wheel


def wheel_from_sdist(sdist: Path, out: Path, epoch: int) -> Path:
    """The wheel built from the unpacked sdist alone (SOURCE_DATE_EPOCH=epoch), into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    _uv_build(sdist, out, epoch, "--wheel")
    (wheel,) = out.glob("automl_setup-*.whl")
    return wheel


def copy_checkout(dest: Path, version: str) -> Path:
    """A copy of this checkout's files (tracked, and untracked ones git does not ignore; no
    .git), with `version` written into pyproject.toml and the plugin manifests in place of
    the checkout's, each file's other bytes kept. Returns `dest`."""
    listed = run_checked(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached", "--others",
         "--exclude-standard"]
    ).stdout  # fmt: skip
    for rel in sorted(set(filter(None, listed.split("\0")))):
        source, target = REPO_ROOT / rel, dest / rel
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet in the index
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    set_version(dest, version)
    return dest


def commit_tree(tree: Path) -> str:
    """Make `tree` a git repository whose one commit holds all its files, as a clean clone of
    the release's commit is; its HEAD commit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_AUTHOR_NAME="Release", GIT_AUTHOR_EMAIL="release@example.invalid",
        GIT_COMMITTER_NAME="Release", GIT_COMMITTER_EMAIL="release@example.invalid",
    )  # fmt: skip
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "release"]):
        run_checked(["git", "-C", str(tree), *argv], env=env)
    return run_checked(["git", "-C", str(tree), "rev-parse", "HEAD"], env=env).stdout.strip()


def set_version(tree: Path, version: str) -> None:
    """Write `version` into `tree`'s pyproject.toml ([project] version) and the plugin
    manifests ("version" members), changing no other byte; checked by reading them back."""
    pyproject = tree / "pyproject.toml"
    text, count = re.subn(
        r'^version = "[^"]*"$', f'version = "{version}"', pyproject.read_text(), count=1,
        flags=re.M,
    )  # fmt: skip
    assert count == 1, f"no version line in {pyproject}"
    pyproject.write_text(text)
    assert project_version(tree) == version
    for rel in VERSIONED_MANIFESTS:
        path = tree / rel
        text = re.sub(r'("version":\s*")[^"]*(")', rf"\g<1>{version}\g<2>", path.read_text())
        path.write_text(text)
        data = json.loads(text)
        found = [p["version"] for p in data["plugins"]] if "plugins" in data else [data["version"]]
        assert found and set(found) == {version}, f"{rel}: {found}"


# --- the release check ------------------------------------------------------------------------

RELEASE_CHECK = REPO_ROOT / ".ci" / "release_check.py"


def _load_release_check() -> ModuleType:
    """.ci/release_check.py as a module: the one place the release rules are written (the
    release workflow and CI run it as a script)."""
    spec = importlib.util.spec_from_file_location("release_check", RELEASE_CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release_check = _load_release_check()


def cut_release(changelog: str, version: str, day: str) -> str:
    """`changelog` as docs/release.md's step 2 leaves it: what [Unreleased] listed now under
    `## [version] - day`, an empty [Unreleased] above it, and a link reference for the new
    section at the bottom."""
    head, rest = changelog.split("## [Unreleased]\n", 1)
    link = f"[{version}]: https://example.invalid/releases/tag/v{version}\n"
    return f"{head}## [Unreleased]\n\n## [{version}] - {day}\n{rest.rstrip()}\n{link}"


# --- the package index -----------------------------------------------------------------------


class PackageIndex:
    """pypiserver on a free loopback port, serving an empty folder of its own: uploads need
    the htpasswd file's user and password (with `private`, every download and listing too, as
    a team's own index); a project it does not hold is redirected to FALLBACK_URL. `start`,
    then `stop` (the fixture's teardown)."""

    def __init__(self, root: Path, user: str = "releaser", *, private: bool = False) -> None:
        self.root = root
        self.packages = root / "packages"
        self.htpasswd = root / "htpasswd"
        self.log = root / "pypiserver.log"
        self.user = user
        self.password = secrets.token_urlsafe(16)
        self.port = 0
        self.authenticate = "update,download,list" if private else "update"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The upload URL (twine's --repository-url)."""
        return f"http://{LOOPBACK}:{self.port}/"

    @property
    def simple_url(self) -> str:
        """The PEP 503 simple index (uv's UV_INDEX_URL, pip's --index-url)."""
        return f"{self.url}simple/"

    def start(self) -> PackageIndex:
        with warnings.catch_warnings():  # passlib imports the deprecated crypt, where it exists
            warnings.simplefilter("ignore", DeprecationWarning)
            from passlib.apache import HtpasswdFile  # pypiserver[passlib]: there with it

        self.packages.mkdir(parents=True, exist_ok=True)
        # An Apache MD5 (apr1) entry, as `htpasswd -m` writes it.
        users = HtpasswdFile(str(self.htpasswd), new=True, default_scheme="apr_md5_crypt")
        users.set_password(self.user, self.password)
        users.save()
        for _ in range(3):  # another process may take the free port first
            self.port = free_port()
            argv = [
                # -v: every request in the log (what a client fetched from the index).
                sys.executable, "-m", "pypiserver", "run", "-v", "--host", LOOPBACK,
                "--port", str(self.port), "--passwords", str(self.htpasswd),
                "--authenticate", self.authenticate, "--fallback-url", FALLBACK_URL,
                str(self.packages),
            ]  # fmt: skip
            with self.log.open("ab") as out:
                self._proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            if self._wait_ready():
                return self
            self.stop()
            if "Address already in use" not in self.log.read_text(errors="replace"):
                break
        raise RuntimeError(
            f"pypiserver did not start on port {self.port}:\n"
            + self.log.read_text(errors="replace")
        )

    def _wait_ready(self) -> bool:
        """Its health endpoint answered: the server is up."""
        deadline = time.monotonic() + INDEX_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}health", timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        stop_process(self._proc)
        self._proc = None

    def files(self) -> list[str]:
        """The names of the files the index holds."""
        return sorted(p.name for p in self.packages.iterdir())

    def upload(
        self, *files: Path, password: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`twine upload` of `files` as the index's user: the password (the right one unless
        given) passes in TWINE_PASSWORD, never on the command line."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TWINE_")}
        env["TWINE_PASSWORD"] = self.password if password is None else password
        # twine asks the system keyring first: none here (no desktop's D-Bus on the way).
        env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
        argv = [
            sys.executable, "-m", "twine", "upload", "--non-interactive",
            "--disable-progress-bar", "--repository-url", self.url, "-u", self.user,
            *map(str, files),
        ]  # fmt: skip
        if check:
            return run_checked(argv, env=env)
        return subprocess.run(
            argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env,
            timeout=COMMAND_TIMEOUT_S, check=False,
        )  # fmt: skip

    def anonymous_upload(self, file: Path) -> int:
        """The upload form twine posts, without any Authorization header: the HTTP status. The
        file's first 4 KiB only: the index answers 401 before it reads the content, and a whole
        wheel's body can then meet the closed socket (a broken pipe) instead of the answer."""
        boundary = secrets.token_hex(16)
        name, version = file.name.split("-")[:2]
        fields = {":action": "file_upload", "protocol_version": "1", "name": name,
                  "version": version.removesuffix(".tar.gz")}  # fmt: skip
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'
            .encode()
            for key, value in fields.items()
        ]  # fmt: skip
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="content"; '
            f'filename="{file.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
            + file.read_bytes()[:4096]
            + f"\r\n--{boundary}--\r\n".encode()
        )
        request = urllib.request.Request(
            self.url,
            data=b"".join(parts),
            method="POST",
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return int(refused.code)


# --- uv tool and uvx against the index ----------------------------------------------------------


def tool_env(root: Path, index: PackageIndex) -> dict[str, str]:
    """A private environment for `uv tool install` and `uvx` under `root`: its own HOME, tool
    folders and uv cache, the index as uv's only index (UV_INDEX_URL, as a team points uv at
    its own), the tool bin folder first on PATH, no VIRTUAL_ENV, no other UV_* setting, and
    the tests' own interpreter (never a download, nor a pyenv shim of another HOME)."""
    home, bin_dir = root / "home", root / "bin"
    for folder in (home, bin_dir):
        folder.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "VIRTUAL_ENV" and not k.startswith(("UV_", "XDG_"))
    }
    env.update(
        HOME=str(home),
        UV_TOOL_DIR=str(root / "tools"),
        UV_TOOL_BIN_DIR=str(bin_dir),
        UV_CACHE_DIR=str(root / "uv-cache"),
        UV_INDEX_URL=index.simple_url,
        UV_PYTHON=sys.executable,
        UV_PYTHON_DOWNLOADS="never",
        PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
    )
    return env


def uvx_command() -> list[str]:
    """`uvx`, from the folder of the uv automl-setup ships with, or `uv tool run`."""
    uv = Path(uv_binary())
    uvx = uv.with_name("uvx")
    return [str(uvx)] if uvx.exists() else [str(uv), "tool", "run"]
