"""Strict JSON for the script tests: no NaN or Infinity, no duplicate key, and (for the one-object
outputs of stats --json and diff --json) one object on one line."""
import json


def _reject(x):
    raise ValueError("non-standard JSON constant " + x)


def _no_dups(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def load(path):
    raw = open(path, encoding="utf-8").read()
    assert raw.endswith("}\n") and raw.count("\n") == 1, "one object on one line"
    return json.loads(raw, parse_constant=_reject, object_pairs_hook=_no_dups)
