"""`kernelwright nightly`: its arguments, its printout (the report's files, what regressed or
failed, what was reverted) and its exit code; the night itself is suites/nightly.py's.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from ..decisions import NIGHTLY_SLOWDOWN
from ..suites.nightly import Nightly, failed, today
from ..suites.tasks import SuiteError, find_tasks, graph_optimizer
from .common import (
    EXIT_MODEL_UNANSWERED,
    EXIT_NEGATIVE,
    EXIT_OK,
    UserError,
    model_unanswered,
    no_gpu_note,
    open_evaluator,
    open_store,
    owning_outputs,
    run_config,
)
from .progress import plain_listener


# -- the command ----------------------------------------------------------------------------------
def cmd_nightly(args: argparse.Namespace) -> int:

    try:
        paths = find_tasks(args.suite)
    except SuiteError as e:
        raise UserError(str(e)) from None
    config = run_config(args)
    with owning_outputs(config, "nightly"):  # one night at a time on an --out, a --db
        return _nightly(args, paths, config)


def _nightly(args: argparse.Namespace, paths: list[Path], config) -> int:
    optimize = graph_optimizer()
    no_gpu = no_gpu_note()
    store = open_store(config.db)
    night = args.night or today()
    with open_evaluator(config) as pool:
        job = Nightly(
            optimize,
            config,
            store,
            pool,
            sys.stdout,
            night=night,
            slowdown=NIGHTLY_SLOWDOWN if args.slowdown is None else args.slowdown,
            search=not args.no_search,
            cuda=not no_gpu,
            revert_on_regression=args.revert_on_regression,
            progress=partial(plain_listener, sys.stdout),  # its lines prefixed '[task] '
        )
        outcomes = job.run(paths)
    report_dir = Path(args.report or Path(config.db).parent / "nightly" / night)
    files = job.write_report(outcomes, report_dir)
    bad = failed(outcomes)
    print(f"report: {files['markdown']} (and {files['html'].name}, {files['json'].name})")
    unanswered = [o for o in outcomes if model_unanswered(o.run, config, f"[{o.label}] ")]
    if bad:
        print(
            f"kernelwright: nightly {night}: {len(bad)} of {len(outcomes)} task(s) regressed or "
            f"failed: {', '.join(o.label for o in bad)}",
            file=sys.stderr,
        )
        for o in bad:
            for r in o.reverts:
                print(
                    f"kernelwright: [{o.label}] reverted from v{r.from_version.version} to "
                    f"v{r.to_version.version}: {r.reason}",
                    file=sys.stderr,
                )
        internal = [o for o in bad if o.evaluator_error]
        if internal:
            print(
                f"kernelwright: {len(internal)} of them are evaluator errors, kernelwright's "
                f"fault and not the kernels' (their kernels were kept, not measured): "
                f"{', '.join(o.label for o in internal)}",
                file=sys.stderr,
            )
        return EXIT_NEGATIVE
    if unanswered:  # the searches ran offline: no regression, but not the night that was asked
        return EXIT_MODEL_UNANSWERED
    print(f"nightly {night}: {len(outcomes)} task(s), no regression")
    return EXIT_OK
