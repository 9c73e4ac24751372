"""Hard real data: the default fit where a Taylor proxy at the mode is poor.

Each section lives in ``benchmarks/_hard_<name>.py`` and exposes
``run(seeds, quick) -> dict`` (JSON-able, with a ``"rows"`` list and a
``"criteria"`` dict of named pass/fail figures) and ``table(result) -> str``
(Markdown). The problems and the reference runs are in ``_hard_problems.py``.
Every figure that decides something is reported for each of three seeds.

Usage::

    python benchmarks/bench_hard_data.py                       # every section, seeds 0 1 2
    python benchmarks/bench_hard_data.py --sections covtype_binary --seeds 0
    python benchmarks/bench_hard_data.py --quick               # smaller runs
    python benchmarks/bench_hard_data.py --sections separable --samplers nuts hmc_ecs

Writes ``benchmarks/results/hard_data.json`` (``--out``), one key per section;
a run of some sections updates those keys and keeps the others. ``--samplers``
re-runs only those samplers' rows of the every-sampler sections (``separable``,
``ill_conditioned``) and merges them into the stored section: every row
carries the commit it was measured at, and the section says what was merged
(``merged``). Re-run ``nuts`` with ``hmc_ecs``: the criterion that compares
their ESS per second takes both from the same run.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from _hard_problems import RESULTS, header, jsonable  # noqa: E402

#: the sections in the order they run
SECTIONS = ["covtype_binary", "covtype_multiclass", "separable", "confidence",
            "ill_conditioned", "linear_sigma", "easy"]


def available():
    here = os.path.dirname(__file__)
    return [s for s in SECTIONS if os.path.exists(os.path.join(here, f"_hard_{s}.py"))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", nargs="+", choices=SECTIONS, default=None,
                    help="sections to run (default: all)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--quick", action="store_true", help="smaller runs (not the figures)")
    ap.add_argument("--out", default=os.path.join(RESULTS, "hard_data.json"))
    ap.add_argument("--reference", action="store_true",
                    help="make the cached long full-data NUTS references the covtype sections "
                         "compare with (results/reference_*.npz) where they are missing "
                         "(an hour or more each on 2 cores)")
    ap.add_argument("--samplers", nargs="+", default=None,
                    help="re-run only these samplers' rows of the every-sampler sections "
                         "(separable, ill_conditioned), merged into the stored ones")
    args = ap.parse_args(argv)
    sections = args.sections or available()
    missing = [s for s in sections if s not in available()]
    if missing:
        ap.error(f"sections not written yet: {', '.join(missing)}")
    result = {}
    if os.path.exists(args.out):
        with open(args.out) as fh:
            result = json.load(fh)
    command = "python benchmarks/bench_hard_data.py " + " ".join(argv or sys.argv[1:])
    mods = {name: importlib.import_module(f"_hard_{name}") for name in sections}
    if args.samplers:
        from _hard_every_sampler import SAMPLERS
        unknown = sorted(set(args.samplers) - set(SAMPLERS))
        if unknown:
            ap.error(f"unknown samplers: {', '.join(unknown)} (known: {', '.join(SAMPLERS)})")
        for name in sections:
            stored = result.get(name)
            if "samplers" not in inspect.signature(mods[name].run).parameters:
                ap.error(f"--samplers: section {name} runs no per-sampler rows")
            if stored is None or stored.get("quick") != args.quick \
                    or list(stored.get("seeds", [])) != list(args.seeds):
                ap.error(f"--samplers merges into a stored {name} section of the same seeds "
                         f"and --quick; {args.out} has none")
    for name in sections:
        mod = mods[name]
        if args.reference and hasattr(mod, "MAKE_REFERENCE"):
            mod.MAKE_REFERENCE = True
        head = header(command.strip())
        if args.samplers:
            stored = result[name]
            res = mod.run(seeds=tuple(args.seeds), quick=args.quick,
                          samplers=tuple(args.samplers), stored=stored)
            res["merged"] = {"samplers": list(args.samplers),
                             "others_from": {k: stored.get(k)
                                             for k in ("commit", "date", "command")}}
        else:
            res = mod.run(seeds=tuple(args.seeds), quick=args.quick)
        for key in ("rows", "long_rows"):     # each row: the commit it was measured at
            if key in res:
                res[key] = [{**r, "commit": r.get("commit", head["commit"])} for r in res[key]]
        res = {**head, "load_average_after": list(os.getloadavg()), "seeds": args.seeds,
               "quick": args.quick, **res}
        print(f"\n## {name}\n")
        print(mod.table(res), flush=True)
        crit = res.get("criteria", {})
        if crit:
            print("\n" + "\n".join(f"- {k}: {'yes' if v else 'NO'}" for k, v in crit.items()))
        result[name] = jsonable(res)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
