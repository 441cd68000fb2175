"""PEP 517 build backend for the pipeplan Python package.

`pip install --no-build-isolation .` calls build_wheel(): CMake configures
and builds the `pipeplan_python` target (the pybind11 extension and the
package files) for the interpreter running pip, and the package is zipped
into a wheel. Nothing is downloaded: CMake, a C++17 compiler, pybind11 and
the Debian -dev packages must be installed (scripts/setup.sh does that).
`pip install -e .` (build_editable) points the environment at the CMake
build tree instead.

Settings (environment or `--config-settings`): PIPEPLAN_BUILD_DIR / build-dir
(default: build-python/ in the source tree), CMAKE_ARGS (extra -D options).
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import re
import shlex
import subprocess
import sys
import sysconfig
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "pipeplan"


def _version():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*pipeplan\s+VERSION\s+([0-9][0-9.]*)", text)
    if not m:
        raise RuntimeError("pipeplan: no 'project(pipeplan VERSION x.y.z)' in CMakeLists.txt")
    return m.group(1)


def _setting(config_settings, key, env):
    if config_settings and config_settings.get(key):
        return str(config_settings[key])
    return os.environ.get(env, "")


def _build(config_settings):
    build_dir = pathlib.Path(_setting(config_settings, "build-dir", "PIPEPLAN_BUILD_DIR")
                             or ROOT / "build-python").resolve()
    configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                 "-DPIPEPLAN_WITH_TORCH=OFF", "-DPIPEPLAN_BUILD_TESTS=OFF",
                 "-DPIPEPLAN_WITH_PYTHON=ON", "-DPython_EXECUTABLE=" + sys.executable]
    configure += shlex.split(_setting(config_settings, "cmake-args", "CMAKE_ARGS"))
    jobs = str(os.cpu_count() or 2)
    for cmd in (configure, ["cmake", "--build", str(build_dir), "--target", "pipeplan_python", "-j", jobs]):
        print("pipeplan build: " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=sys.stderr)
    package = build_dir / "python" / NAME
    if not any(package.glob("_pipeplan*.so")) and not any(package.glob("_pipeplan*.pyd")):
        raise RuntimeError(
            "pipeplan: CMake built no extension in %s; is pybind11 importable from %s? "
            "(apt-get install python3-pybind11 python3-dev; in a venv use --system-site-packages)"
            % (package, sys.executable))
    return build_dir


def _tag():
    impl = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return impl, impl, platform


def _metadata():
    readme = ROOT / "docs" / "python.md"
    summary = "Pipeline-parallel schedule compiler: plan, verify and simulate schedules in process"
    lines = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + _version(),
             "Summary: " + summary, "Requires-Python: >=3.8"]
    text = "\n".join(lines) + "\n"
    if readme.exists():
        text += "Description-Content-Type: text/markdown\n\n" + readme.read_text()
    return text


class _Wheel:
    def __init__(self, directory, editable=False):
        impl, abi, platform = _tag()
        self.dist_info = "%s-%s.dist-info" % (NAME, _version())
        self.name = "%s-%s-%s-%s-%s.whl" % (NAME, _version(), impl, abi, platform)
        self.tag = "%s-%s-%s" % (impl, abi, platform)
        self.path = pathlib.Path(directory) / self.name
        self.zip = zipfile.ZipFile(self.path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, arcname, data):
        if isinstance(data, str):
            data = data.encode()
        self.zip.writestr(arcname, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    def close(self):
        self.add(self.dist_info + "/METADATA", _metadata())
        self.add(self.dist_info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: pipeplan_build\n"
                 "Root-Is-Purelib: false\nTag: %s\n" % self.tag)
        self.add(self.dist_info + "/top_level.txt", NAME + "\n")
        record = self.dist_info + "/RECORD"
        self.zip.writestr(record, "\n".join(self.records + [record + ",,"]) + "\n")
        self.zip.close()
        return self.name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build(config_settings) / "python" / NAME
    wheel = _Wheel(wheel_directory)
    for f in sorted(package.iterdir()):
        if f.is_file() and (f.suffix in (".py", ".pyi", ".so", ".pyd") or f.name == "py.typed"):
            wheel.add("%s/%s" % (NAME, f.name), f.read_bytes())
    return wheel.close()


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build_dir = _build(config_settings)
    wheel = _Wheel(wheel_directory, editable=True)
    wheel.add(NAME + ".pth", str(build_dir / "python") + "\n")
    return wheel.close()
