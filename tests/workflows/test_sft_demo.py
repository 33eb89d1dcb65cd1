"""The SFT run on CPU, end to end through the real command line: `automl-setup demo --sft`
(an environment given the machine's torch by pip first, the engine installed from `main` with
the training extra, launch, SIGTERM during the second candidate, resume), then `status`,
another build installed into that environment and `resume` refused, and the torch that was
there kept through every install. Nothing is downloaded (HF_HUB_OFFLINE)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.engines import engine_marker
from support.trees import tree_digest

torch = pytest.importorskip("torch", reason="the SFT run needs torch")
pytest.importorskip("transformers", reason="the SFT run reloads exports with transformers")

import support.training  # noqa: E402, F401  (puts the engine source on sys.path, hub offline)
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

# isort: split
from automl_refengine.training.sft import (  # noqa: E402
    TrialParams,
    load_records,
    run_trial,
    sha256_file,
)

from mcp_server.source.sourcerepo import (  # noqa: E402
    DEFAULT_SUBDIRECTORY,
    REFERENCE_DISTRIBUTION,
    SourceRepository,
    reference_engine_source,
)

EXPERIMENT = "sft-lora"
QUESTIONS = 16


class Demo:
    def __init__(self, root: Path, stdout: str) -> None:
        self.root, self.stdout = root, stdout
        self.env = root / "env-sft"
        self.workspace = root / "workspace"
        self.manifest = root / "sft-lora.yaml"
        self.main = re.search(r"main -> ([0-9a-f]{40})", stdout).group(1)  # type: ignore[union-attr]

    def repo_args(self, url: str | None = None) -> list[str]:
        url = url or (self.root / "repo" / "origin.git").resolve().as_uri()
        return ["--repository", url, "--subdirectory", DEFAULT_SUBDIRECTORY,
                "--distribution", REFERENCE_DISTRIBUTION]  # fmt: skip

    def status(self) -> dict[str, Any]:
        result = run_cli(
            "status", "--experiment-id", EXPERIMENT, "--workspace", str(self.workspace), "--json"
        )
        assert result.code == 0, result.output
        return json.loads(result.stdout)

    def metrics(self, index: int) -> dict[str, Any]:
        path = self.workspace / EXPERIMENT / f"trial-{index:05d}" / "metrics.json"
        return json.loads(path.read_text())

    def torch_files(self) -> dict[str, str]:
        """torch's dist-info, whose RECORD holds the hash of every file of the build."""
        return tree_digest(self.site, skip=lambda rel: not rel.parts[0].startswith("torch-"))

    def snapshot(self) -> dict[str, str]:
        """`env_snapshot`, but torch's own 15,000 files stand for themselves by its RECORD
        (hashing them all would take seconds)."""
        site = self.site.relative_to(self.env).parts
        return tree_digest(
            self.env,
            skip=lambda rel: rel.name == "lock" or rel.parts[: len(site) + 1] == (*site, "torch"),
        ) | {"torch RECORD": json.dumps(self.torch_files())}

    @property
    def site(self) -> Path:
        return next((self.env / "lib").glob("python*/site-packages"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    root = tmp_path_factory.mktemp("sft") / "demo"
    result = run_cli("demo", "--sft", "--workdir", str(root), env={"HF_HUB_OFFLINE": "1"})
    assert result.code == 0, result.output
    return Demo(root, result.stdout)


@pytest.mark.slow
def test_demo_runs_both_candidates_through_an_interruption_and_prints_the_table(
    demo: Demo,
) -> None:
    out = demo.stdout
    assert "DEMO OK" in out
    assert "after SIGTERM: state interrupted, 1 of 2 candidates done" in out
    assert "engine exit code 0; state completed" in out
    status = demo.status()
    assert status["state"] == "completed" and status["trials_done"] == 2
    assert status["bound_commit"] == demo.main
    binding = json.loads(
        (demo.workspace / ".automl-setup" / EXPERIMENT / "binding.json").read_text()
    )
    assert binding["engine"]["source"]["commit"] == demo.main
    assert f"commit {demo.main} (refs/heads/main)" in out
    assert f"identity {status['identity_digest']}" in out
    trials = {t["index"]: t for t in status["trials"]}
    assert trials[1]["attempts"] == 2  # the interrupted candidate ran again on resume
    for index in (0, 1):
        m = demo.metrics(index)
        assert trials[index]["state"] == "succeeded"
        assert isinstance(m["score"], int) and 0 <= m["score"] <= QUESTIONS
        assert m["questions"] == QUESTIONS and m["steps"] == 5 and len(m["loss_curve"]) == 5
        assert re.search(
            rf"^   {index} +lr=\S+ rank=\d alpha=\d+ rslora=o\w+ +5 +{m['rollbacks']} +"
            rf"{m['score']}/16$",
            out,
            re.M,
        ), out
        assert f"export {m['export_dir']}  sha256 {m['export_sha256']}" in out
        # The export is a plain HF checkpoint: it reloads, and holds no adapter key.
        export = Path(m["export_dir"])
        assert sha256_file(export / "model.safetensors") == m["export_sha256"]
        keys = load_file(export / "model.safetensors").keys()
        assert keys and not [k for k in keys if "lora" in k]
        reloaded = AutoModelForCausalLM.from_pretrained(export)
        assert set(reloaded.state_dict()) >= set(keys)
    # The seed draws one learning rate too small to change anything and one that learns.
    assert demo.metrics(0)["score"] == demo.metrics(0)["score_before"] == 0
    assert demo.metrics(1)["score"] >= 12
    # pip's torch is the one the engine runs with: the install kept it.
    record = json.loads((demo.env / ".automl-setup" / "engine-record.json").read_text())
    assert record["environment"]["watched"]["torch"] == torch.__version__


@pytest.mark.slow
def test_the_same_seed_gives_the_same_scores_and_exports(demo: Demo, tmp_path: Path) -> None:
    # In-process reruns of the workload with each candidate's params (the engine's own code).
    for trial in demo.status()["trials"]:
        m = demo.metrics(trial["index"])
        export = tmp_path / str(trial["index"])
        again = run_trial(TrialParams.from_json(trial["params"]), export, steps=5)
        assert (again.score, again.losses, again.rollbacks) == (
            m["score"],
            m["loss_curve"],
            m["rollbacks"],
        )
        assert again.export_sha256 == m["export_sha256"]


def test_the_packaged_dataset_is_64_records_and_16_disjoint_held_out_questions() -> None:
    train, held_out = load_records("train"), load_records("eval")
    assert (len(train), len(held_out)) == (64, 16)
    assert not {r.prompt for r in train} & {r.prompt for r in held_out}
    for record in [*train, *held_out]:
        letters = record.prompt.removesuffix("?")
        assert set(letters) <= {"a", "b"} and len(letters) in (5, 7)
        assert record.answer == max("ab", key=letters.count)
    assert sorted(r.answer for r in held_out) == ["a"] * 8 + ["b"] * 8


@pytest.mark.slow
def test_resume_after_another_build_in_that_environment_is_refused(demo: Demo) -> None:
    torch_before = demo.torch_files()
    installed = run_cli(
        "install", "--branch", "dev/next", "--extra", "training", "--python", str(demo.env),
        *demo.repo_args(),
    )  # fmt: skip
    assert installed.code == 0, installed.output
    assert demo.torch_files() == torch_before
    trials_before = tree_digest(demo.workspace / EXPERIMENT)

    refused = run_cli(
        "resume", "--experiment-id", EXPERIMENT, "--workspace", str(demo.workspace),
        "--manifest", str(demo.manifest), "--python", str(demo.env),
    )  # fmt: skip

    assert refused.code == 1, refused.output
    assert f"is not the build experiment {EXPERIMENT} is bound to" in refused.output
    assert f"source.commit: recorded {demo.main}" in refused.output
    assert tree_digest(demo.workspace / EXPERIMENT) == trials_before  # no training repeated
    assert engine_marker(demo.env) == "dev/next"


@pytest.mark.slow
def test_an_engine_that_would_replace_torch_is_refused_and_torch_kept(
    demo: Demo, tmp_path: Path
) -> None:
    pyproject = (reference_engine_source() / "pyproject.toml").read_text()
    assert '"torch>=2.6"' in pyproject
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine(
        "main",
        marker="wants-other-torch",
        files={
            f"{DEFAULT_SUBDIRECTORY}/pyproject.toml": pyproject.replace("torch>=2.6", "torch>=99")
        },
    )
    before = demo.snapshot(), engine_marker(demo.env)

    result = run_cli(
        "install", "--branch", "main", "--extra", "training", "--python", str(demo.env),
        *demo.repo_args(repo.url), env={"UV_OFFLINE": "1"},  # never a torch download
    )  # fmt: skip

    assert result.code == 1, result.output
    assert "check torch" in result.output and "requires torch>=99" in result.output
    assert f"has torch {torch.__version__}, which an install never replaces" in result.output
    assert (demo.snapshot(), engine_marker(demo.env)) == before
