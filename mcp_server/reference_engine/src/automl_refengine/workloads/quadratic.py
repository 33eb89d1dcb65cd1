"""A pure-Python objective for demos and tests: a shifted quadratic bowl.

    loss = (x - 0.3)^2 + (y + 0.1)^2 + offset(opt)

`opt` is optional (adam 0.0, sgd 0.05, rmsprop 0.1); other params are ignored.
The metrics file is written atomically, so the engine never reads half of it.
Only the standard library is imported: trials start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

OFFSETS = {"adam": 0.0, "sgd": 0.05, "rmsprop": 0.1}


def loss(params: dict[str, object]) -> float:
    x, y = params["x"], params["y"]
    if not isinstance(x, int | float) or not isinstance(y, int | float):
        raise ValueError("params x and y must be numbers")
    opt = params.get("opt", "adam")
    if opt not in OFFSETS:
        raise ValueError(f"unknown opt {opt!r}; known: {', '.join(OFFSETS)}")
    return (x - 0.3) ** 2 + (y + 0.1) ** 2 + OFFSETS[str(opt)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m automl_refengine.workloads.quadratic")
    parser.add_argument("--params", type=Path, required=True, help="params JSON file")
    parser.add_argument("--out", type=Path, required=True, help="metrics JSON file to write")
    parser.add_argument("--metric", default="loss")
    parser.add_argument("--sleep", type=float, default=0.0, metavar="SECONDS")
    args = parser.parse_args(argv)
    params = json.loads(args.params.read_text())
    try:
        value = loss(params)
    except (KeyError, ValueError) as exc:
        print(f"quadratic: bad params: {exc}", file=sys.stderr)
        return 2
    print(f"params {json.dumps(params, sort_keys=True)}", flush=True)
    time.sleep(args.sleep)  # stands in for training time, so a demo can interrupt it
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(json.dumps({args.metric: value}) + "\n")
    tmp.replace(args.out)
    print(f"{args.metric} {value:.6g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
