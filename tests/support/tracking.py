"""A real MLflow tracking server on 127.0.0.1 for the `track` tests: `mlflow server` (SQLite
backend store, a local artifact folder, artifacts served through it) from a folder of its own
(`AUTOML_MLFLOW`, default /opt/automl-mlflow: a venv with tests/tracking/server-requirements.txt,
as .ci/run makes it), so the heavy server never enters the project's environment; optionally
MLflow's basic-auth app. Absent, a test is skipped with the reason, and failed where
AUTOML_REQUIRE_MLFLOW=1 (CI). Stopped with its whole process group, also on failure."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.remotes import free_port, stop_process

FOLDER_ENV, REQUIRE_ENV = "AUTOML_MLFLOW", "AUTOML_REQUIRE_MLFLOW"
ADMIN = ("admin", "Adm1n-Test-Pw-7731")  # the auth app refuses its old default password
START_S = 120.0


def mlflow_program() -> Path:
    folder = Path(os.environ.get(FOLDER_ENV, "/opt/automl-mlflow"))
    program = folder / "venv" / "bin" / "mlflow"
    if not program.exists():
        reason = (
            f"no MLflow server at {program}: python3 -m venv {folder}/venv && "
            f"{folder}/venv/bin/pip install -r tests/tracking/server-requirements.txt "
            f"(as .ci/run does), or set {FOLDER_ENV}"
        )
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return program


class MlflowServer:
    """One server's folder and port; `start` and `stop` again keep both (a restart)."""

    def __init__(self, root: Path, *, auth: bool = False) -> None:
        self.program = mlflow_program()
        self.root, self.auth = root, auth
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)
        self.log = root / "server.log"

    def start(self) -> None:
        argv = [str(self.program), "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--workers", "1", "--backend-store-uri", f"sqlite:///{self.root / 'db.sqlite'}",
                "--artifacts-destination", str(self.root / "artifacts")]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        if self.auth:
            config = self.root / "auth.ini"
            config.write_text(
                "[mlflow]\ndefault_permission = READ\n"
                f"database_uri = sqlite:///{self.root / 'auth.db'}\n"
                f"admin_username = {ADMIN[0]}\nadmin_password = {ADMIN[1]}\n"
                "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
            )
            argv += ["--app-name", "basic-auth"]
            env |= {"MLFLOW_AUTH_CONFIG_PATH": str(config),
                    "MLFLOW_FLASK_SERVER_SECRET_KEY": "automl-setup-tests"}  # fmt: skip
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env, cwd=self.root,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"mlflow server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"mlflow server not up in {START_S:.0f} s: {self.log.read_text()}")

    def stop(self) -> None:
        """The server, its workers and whatever they started (remotes.stop_process)."""
        stop_process(self.proc)
        self.proc = None

    def api(
        self, method: str, path: str, body: dict[str, Any] | None = None,
        user: tuple[str, str] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """MLflow's REST API, as any client sees it (admin's credentials on an auth server)."""
        request = urllib.request.Request(
            f"{self.url}/api/2.0/mlflow/{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(self._signed(request, user), timeout=30) as answer:
            data: dict[str, Any] = json.loads(answer.read() or b"{}")
            return data

    def _signed(
        self, request: urllib.request.Request, user: tuple[str, str] | None = None
    ) -> urllib.request.Request:
        """`request` with Basic auth as `user`, else as admin on an auth server."""
        who = user or (ADMIN if self.auth else None)
        if who:
            token = base64.b64encode(f"{who[0]}:{who[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return request

    def runs(self, experiment_id: str) -> list[dict[str, Any]]:
        body = {"experiment_ids": [experiment_id], "max_results": 1000}
        return list(self.api("POST", "runs/search", body).get("runs", []))

    def artifact(self, run: dict[str, Any], path: str) -> bytes:
        url = f"{self.url}/get-artifact?path={path}&run_uuid={run['info']['run_id']}"
        with urllib.request.urlopen(self._signed(urllib.request.Request(url)), timeout=30) as got:
            data: bytes = got.read()
            return data


def tags(run: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def params(run: dict[str, Any]) -> dict[str, str]:
    return {p["key"]: p["value"] for p in run["data"].get("params", [])}


def metrics(run: dict[str, Any]) -> dict[str, tuple[float, int]]:
    return {m["key"]: (m["value"], m["step"]) for m in run["data"].get("metrics", [])}
