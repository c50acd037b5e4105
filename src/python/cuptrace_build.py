"""The build backend of the cuptrace Python package (PEP 517, named in pyproject.toml).

A pure-Python wheel is a zip of the package plus three small metadata files, so this backend
writes it with the standard library alone: `pip install <folder>` then needs nothing else —
no setuptools, no wheel, no network (pip's isolated build environment stays empty) — and
writes nothing into the folder, which may be read-only (<prefix>/share/cuptrace/python).
Only what pip calls for an install is here: build_wheel and its companions.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "cuptrace"
TAG = "py3-none-any"


def _version() -> str:
    with open(os.path.join(HERE, NAME, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("cuptrace/__init__.py has no __version__")
    return m.group(1)


def _files() -> List[Tuple[str, str]]:
    """(archive name, path) of every file of the package, sorted (reproducible wheels)."""
    pkg = os.path.join(HERE, NAME)
    out = [(NAME + "/" + n, os.path.join(pkg, n)) for n in os.listdir(pkg)
           if n.endswith(".py") or n == "py.typed"]
    return sorted(out)


def _metadata(version: str) -> Dict[str, str]:
    return {
        "METADATA": ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                     "Summary: Trace CUDA programs from Python (scripts and notebooks) with "
                     "cuptrace\nRequires-Python: >=3.8\n" % (NAME, version)),
        "WHEEL": ("Wheel-Version: 1.0\nGenerator: cuptrace_build\nRoot-Is-Purelib: true\n"
                  "Tag: %s\n" % TAG),
        "top_level.txt": NAME + "\n",
    }


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode("ascii")


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    version = _version()
    info = "%s-%s.dist-info" % (NAME, version)
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for n, text in _metadata(version).items():
        with open(os.path.join(metadata_directory, info, n), "w", encoding="utf-8") as f:
            f.write(text)
    return info


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    version = _version()
    info = "%s-%s.dist-info" % (NAME, version)
    wheel = "%s-%s-%s.whl" % (NAME, version, TAG)
    tmp = os.path.join(wheel_directory, wheel + ".part")
    record: List[str] = []
    # Written aside and renamed: a failed build leaves no half wheel.
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc: str, data: bytes) -> None:
            z.writestr(zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0)), data)
            record.append("%s,%s,%d" % (arc, _digest(data), len(data)))

        for arc, path in _files():
            with open(path, "rb") as f:
                add(arc, f.read())
        for n, text in _metadata(version).items():
            add(info + "/" + n, text.encode("utf-8"))
        record.append(info + "/RECORD,,")
        z.writestr(zipfile.ZipInfo(info + "/RECORD", date_time=(1980, 1, 1, 0, 0, 0)),
                   "\n".join(record) + "\n")
    os.replace(tmp, os.path.join(wheel_directory, wheel))
    return wheel
