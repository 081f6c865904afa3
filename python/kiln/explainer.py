"""kiln.explain(model, *inputs): compile with kiln and report, op by op, what
was lowered and what fell back to PyTorch, and why."""

from __future__ import annotations

import dataclasses
import functools
import logging

import torch

from kiln.dynamo_backend import kiln_backend
from kiln.options import Options
from kiln.report import Report

log = logging.getLogger("kiln")


def explain_model(model, inputs, options: Options) -> Report:
    reports = []
    backend = functools.partial(kiln_backend, options=dataclasses.asdict(options) | {"verbose": False}, reports=reports)
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        compiled(*inputs)
    report = Report(reports)
    if options.verbose:
        log.warning("%s", report)
    return report
