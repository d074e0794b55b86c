"""PEP 517 build backend for the `mooncake` Python package (standard library only).

Why our own backend: the package is pure Python plus one shared library compiled from Go
(`go build -buildmode=c-shared ./cmd/libmooncake_store`). Machines that run inference servers
often have no package index, and setuptools before 70 cannot build a wheel without the separate
`wheel` package. A wheel is a zip file with three metadata files, so this backend writes it
directly and `pip install ./python` needs nothing but Go, gcc and pip itself.

The same backend makes the wheel that needs no Go (`make wheel`, or
`python3 python/buildtools/mooncake_build.py DIR`): the distribution is `mooncake-go`
(mooncake_go-VERSION-py3-none-manylinux_2_NN_ARCH.whl), the import package `mooncake`, the
library inside it. The manylinux tag is read from the library itself: the newest GLIBC_x.y
symbol version it needs (glibc 2.34 when built on glibc 2.34 or later, as cgo's pthread calls
moved into libc there; docs/python.md, "A wheel without Go").

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
import struct
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

NAME = "mooncake"
# DIST is the distribution's name ("mooncake-go" normalized, as wheel file names spell it):
# the import package keeps Mooncake's name, the distribution says which implementation it is.
DIST = "mooncake_go"
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


def _tag(lib=None):
    """The wheel's tag. The library is tied to the platform, not to a Python version or ABI
    (ctypes loads it); with the library at hand, its glibc needs give a manylinux tag."""
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    if lib is not None and platform.startswith("linux_"):
        need = glibc_needed(lib)
        if need is not None:
            platform = f"manylinux_{need[0]}_{need[1]}_{platform[len('linux_'):]}"
    return "py3-none-" + platform


def glibc_needed(path):
    """The newest GLIBC_x.y version an ELF shared library needs, as (x, y), or None when it
    is not a 64-bit little-endian ELF or needs no versioned glibc symbol. The version names are
    strings in .dynstr (referenced by .gnu.version_r), so that section is all that is read."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
        name, typ, _, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, typ, off, size

    _, _, stroff, _ = section(shstrndx)
    best = None
    for i in range(shnum):
        name, typ, off, size = section(i)
        sname = data[stroff + name : data.index(b"\0", stroff + name)]
        if sname != b".dynstr":
            continue
        for m in re.finditer(rb"GLIBC_(\d+)\.(\d+)", data[off : off + size]):
            v = (int(m.group(1)), int(m.group(2)))
            best = v if best is None else max(best, v)
    return best


def _metadata(version):
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST.replace('_', '-')}\n"
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
    # -s -w: no symbol table or DWARF (a third of the size); Go's own stack traces still work.
    cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/libmooncake_store"]
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


def _write_wheel(wheel_directory, files, tag):
    """Writes a wheel holding files ({archive name: bytes}) and returns its file name."""
    version = _version()
    dist_info = f"{DIST}-{version}.dist-info"
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

    name = f"{DIST}-{version}-{tag}.whl"
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
        lib = _build_lib(tmp)
        with open(lib, "rb") as f:
            files[f"{NAME}/{LIB}"] = f.read()
        tag = _tag(lib)
    return _write_wheel(wheel_directory, files, tag)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # An editable install imports the sources in place: the library is built into the source
    # package directory (ignored by git) and a .pth file puts python/ on sys.path.
    with tempfile.TemporaryDirectory() as tmp:
        # Built aside and copied: go build also writes a cgo header the package does not need.
        shutil.copyfile(_build_lib(tmp), os.path.join(_PKG_DIR, LIB))
    return _write_wheel(wheel_directory, {f"__editable__.{NAME}.pth": (_PKG_ROOT + "\n").encode()}, _tag())


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError(
        "mooncake has no source distribution: the library is compiled from the whole Go "
        "module; install from a checkout with `pip install ./python`"
    )


if __name__ == "__main__":
    # `make wheel`: python3 python/buildtools/mooncake_build.py OUTDIR prints the wheel's path.
    if len(sys.argv) != 2:
        sys.exit("usage: mooncake_build.py OUTDIR")
    os.makedirs(sys.argv[1], exist_ok=True)
    print(os.path.join(sys.argv[1], build_wheel(sys.argv[1])))
