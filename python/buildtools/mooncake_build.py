"""PEP 517 build backend for the `mooncake` Python package (standard library only).

Why our own backend: the package is pure Python plus one shared library compiled from Go
(`go build -buildmode=c-shared ./cmd/libmooncake_store`). Machines that run inference servers
often have no package index, and setuptools before 70 cannot build a wheel without the separate
`wheel` package. A wheel is a zip file with three metadata files, so this backend writes it
directly and `pip install ./python` needs nothing but Go, gcc and pip itself.

Environment:
  MOONCAKE_BUILD_LIB   path of an already-built libmooncake_store.so to pack instead of
                       compiling one (the test suite builds the library once and reuses it).
  MOONCAKE_GO_SOURCE   the Go module root; default: the parent of this package's directory.
  GO                   the go command; default: "go" on PATH.
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import zipfile

NAME = "mooncake"
LIB = "libmooncake_store.so"
SUMMARY = "Mooncake Store's Python API (mooncake.store) over mooncake-go"

# The package sources sit beside buildtools/; pip runs the hooks from that directory too, but
# the path is derived from this file so a hook called from elsewhere still finds them.
_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG_ROOT = os.path.dirname(_HERE)
_PKG_DIR = os.path.join(_PKG_ROOT, NAME)


def _version():
    with open(os.path.join(_PKG_DIR, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("mooncake/__init__.py has no __version__ line")
    return m.group(1)


def _tag():
    # The library is tied to the platform, not to a Python version or ABI (ctypes loads it).
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def _metadata(version):
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "Requires-Python: >=3.9\n"
    )


def _build_lib(out_dir):
    """Returns the path of libmooncake_store.so: the prebuilt one, or one compiled now."""
    prebuilt = os.environ.get("MOONCAKE_BUILD_LIB")
    if prebuilt:
        if not os.path.isfile(prebuilt):
            raise RuntimeError(f"MOONCAKE_BUILD_LIB={prebuilt}: no such file")
        return prebuilt
    src = os.environ.get("MOONCAKE_GO_SOURCE") or os.path.dirname(_PKG_ROOT)
    if not os.path.isfile(os.path.join(src, "go.mod")):
        raise RuntimeError(
            f"cannot find the Go sources (no go.mod in {src}): build from a checkout of "
            "mooncake-go (pip install ./python) or set MOONCAKE_GO_SOURCE"
        )
    go = os.environ.get("GO", "go")
    if shutil.which(go) is None:
        raise RuntimeError(f"building libmooncake_store.so needs Go ({go!r} is not on PATH) and gcc")
    out = os.path.join(out_dir, LIB)
    env = dict(os.environ, CGO_ENABLED="1")
    cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./cmd/libmooncake_store"]
    res = subprocess.run(cmd, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if res.returncode != 0:
        raise RuntimeError(
            "go build of libmooncake_store.so failed (it needs Go and gcc):\n"
            + res.stdout.decode(errors="replace")
        )
    return out


def _digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={h}"


def _write_wheel(wheel_directory, files):
    """Writes a wheel holding files ({archive name: bytes}) and returns its file name."""
    version = _version()
    dist_info = f"{NAME}-{version}.dist-info"
    tag = _tag()
    files = dict(files)
    files[f"{dist_info}/METADATA"] = _metadata(version).encode()
    files[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: mooncake_build\nRoot-Is-Purelib: false\nTag: {tag}\n"
    ).encode()
    files[f"{dist_info}/top_level.txt"] = f"{NAME}\n".encode()
    record_name = f"{dist_info}/RECORD"
    record = "".join(f"{n},{_digest(d)},{len(d)}\n" for n, d in files.items())
    record += f"{record_name},,\n"
    files[record_name] = record.encode()

    name = f"{NAME}-{version}-{tag}.whl"
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            # The library must stay executable; the rest is plain data.
            info.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return name


def _package_sources():
    out = {}
    for fn in sorted(os.listdir(_PKG_DIR)):
        if fn.endswith(".py") or fn == "py.typed":
            with open(os.path.join(_PKG_DIR, fn), "rb") as f:
                out[f"{NAME}/{fn}"] = f.read()
    return out


# --- PEP 517 hooks ---------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_sources()
    with tempfile.TemporaryDirectory() as tmp:
        with open(_build_lib(tmp), "rb") as f:
            files[f"{NAME}/{LIB}"] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # An editable install imports the sources in place: the library is built into the source
    # package directory (ignored by git) and a .pth file puts python/ on sys.path.
    with tempfile.TemporaryDirectory() as tmp:
        # Built aside and copied: go build also writes a cgo header the package does not need.
        shutil.copyfile(_build_lib(tmp), os.path.join(_PKG_DIR, LIB))
    return _write_wheel(wheel_directory, {f"__editable__.{NAME}.pth": (_PKG_ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError(
        "mooncake has no source distribution: the library is compiled from the whole Go "
        "module; install from a checkout with `pip install ./python`"
    )
