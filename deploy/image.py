"""Build identityctl's OCI image from Debian packages and the PEX, with no base image.

    python3 deploy/image.py --pex dist/identityctl.pex --out build/image

(build_image.sh runs it.) Two layers:

1. Debian: the Python runtime's packages (ROOTS and what they depend on, at the versions apt
   offers now), each unpacked with `dpkg-deb -x`. Their maintainer scripts do not run: what
   they would make that the service needs (the CA bundle) is made here. Cached in CACHE,
   keyed by the package list, so a second build downloads and packs nothing.
2. identityctl: the PEX, its venv unpacked once by the image's own Python (in a chroot, so
   the first start does not unpack it), the entrypoint, the user 10001 and the volume /data.

Writes the OCI image layout (index.json, blobs/sha256/...) and the same files as one tar,
which `docker load` and `podman load` take (its manifest.json is Docker's index). Fixed
mtimes, sorted entries and gzip without a timestamp: the same inputs give the same digests.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

#: What the PEX runs on: CPython 3.11 with its standard library, and the CA certificates
#: that outbound HTTPS (webhooks, federation, client documents) checks servers against.
ROOTS = ("python3.11-minimal", "libpython3.11-stdlib", "ca-certificates")
#: Needed only by maintainer scripts, which do not run here.
SKIPPED = frozenset({"dpkg", "install-info", "debconf", "debconf-2.0", "openssl",
                     "perl-base"})
#: Files no process in the image reads.
PRUNED = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
          "usr/share/lintian", "usr/lib/python3.11/test", "usr/lib/python3.11/ensurepip")
CACHE = Path(os.environ.get("IDENTITYCTL_IMAGE_CACHE")
             or Path.home() / ".cache" / "identityctl-image")
#: apt's binary cache of the package lists, kept in CACHE: Debian's container images switch
#: it off, and then every apt-cache call parses all the lists again (seconds each).
APT_CACHE = ("-o", f"Dir::Cache::pkgcache={CACHE / 'pkgcache.bin'}",
             "-o", f"Dir::Cache::srcpkgcache={CACHE / 'srcpkgcache.bin'}")
UID = GID = 10001
#: The exit status when the packages could not be downloaded (the tests skip on it).
NO_DOWNLOAD = 3
PEX_DIR = "opt/identityctl"
ENTRYPOINT = "/usr/local/bin/identityctl-entrypoint"
#: identityctl's command in the image (the venv's own console script would need /bin/sh).
IDENTITYCTL = "/usr/local/bin/identityctl"
PORT = 8090
CA_BUNDLE = "etc/ssl/certs/ca-certificates.crt"
#: Every file's time in the layers: one fixed time, whatever the commit, so that a layer's
#: digest and its cache key depend on its contents alone (the config's "created" is the
#: commit's time, SOURCE_DATE_EPOCH).
FILE_TIME = 0
#: The build format's own version: a change to how the Debian layer is made starts a new key.
LAYER_FORMAT = "3"


def packages() -> list[str]:
    """ROOTS and their dependencies (the first of alternatives) as name=version, sorted;
    cached until apt's package lists change (`apt-get update`)."""
    # The signed release files name every package list by its hash: a small, exact key.
    releases = sorted(Path("/var/lib/apt/lists").glob("*Release"))
    key = digest_of([*ROOTS, *sorted(SKIPPED), *(path.read_bytes() for path in releases)])
    cached = CACHE / f"packages-{key}.txt"
    if not cached.exists():
        cached.write_text("\n".join(resolve()))
    return cached.read_text().split("\n")


def digest_of(parts: list[str | bytes]) -> str:
    """A short key for a cache file name."""
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part if isinstance(part, bytes) else part.encode())
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


def resolve() -> list[str]:
    """What :func:`packages` returns, asked of apt."""
    seen: dict[str, str] = {}
    level = set(ROOTS)
    while level:  # PERF: one apt-cache per level; each call reads every package list
        shown = subprocess.run(["apt-cache", *APT_CACHE, "show", "--no-all-versions",
                                *sorted(level)],
                               capture_output=True, text=True, check=True).stdout
        following: set[str] = set()
        for stanza in filter(None, shown.split("\n\n")):
            fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                          if ": " in line and not line.startswith(" "))
            seen[fields["Package"]] = fields["Version"]
            for field in ("Pre-Depends", "Depends"):
                for clause in filter(None, fields.get(field, "").split(", ")):
                    following.add(clause.split(" | ")[0].split(" ")[0].split(":")[0])
        level = following - seen.keys() - SKIPPED
    return sorted(f"{name}={version}" for name, version in seen.items())


def debian_layer(wanted: list[str]) -> tuple[Path, str]:
    """The cached layer of these packages (made when missing) and its uncompressed digest."""
    layer = CACHE / f"debian-{digest_of([LAYER_FORMAT, *wanted])}.tar.gz"
    if layer.exists():
        return layer, layer.with_suffix(".diffid").read_text()
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    # As root, apt would hand the download to its _apt user, who may not write to CACHE.
    downloaded = subprocess.run(["apt-get", *APT_CACHE, "download", "-qq", "-o",
                                 "APT::Sandbox::User=root", *wanted], cwd=debs)
    if downloaded.returncode != 0:
        print("image.py: apt-get download failed (no network, or old package lists: "
              "apt-get update)", file=sys.stderr)
        sys.exit(NO_DOWNLOAD)
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        root = Path(scratch)
        for item in wanted:
            name, version = item.split("=")
            deb, = debs.glob(f"{name}_{version.replace(':', '%3a')}_*.deb")
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        for path in PRUNED:
            shutil.rmtree(root / path, ignore_errors=True)
        compile_python(as_root(root), "/usr/lib/python3.11")
        # What update-ca-certificates would write: every certificate Mozilla trusts, in one file.
        bundle = root / CA_BUNDLE
        bundle.parent.mkdir(parents=True, exist_ok=True)
        bundle.write_bytes(b"".join(
            path.read_bytes() for path in sorted(root.glob("usr/share/ca-certificates/*/*.crt"))))
        partial = layer.with_suffix(".partial")
        diff_id = write_layer(partial, tree(root, owner=lambda _: (0, 0)))
    layer.with_suffix(".diffid").write_text(diff_id)
    partial.rename(layer)
    return layer, diff_id


Entries = Iterator[tuple[tarfile.TarInfo, Path]]


def tree(root: Path, *, owner: Callable[[str], tuple[int, int]]) -> Entries:
    """Every file, folder and link under ``root``, sorted, with fixed times and owners."""
    paths = sorted(root.rglob("*"), key=lambda path: path.relative_to(root).as_posix())
    for path in paths:
        relative = path.relative_to(root).as_posix()
        info = tarfile.TarInfo(relative)
        stat = path.lstat()
        info.mode = stat.st_mode & 0o7777
        info.mtime = FILE_TIME
        info.uid, info.gid = owner(relative)
        if path.is_symlink():
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
        elif path.is_dir():
            info.type = tarfile.DIRTYPE
        else:
            info.size = stat.st_size
        yield info, path


def add(tar: tarfile.TarFile, entries: Entries) -> None:
    for info, path in entries:
        if info.isreg():
            with path.open("rb") as handle:
                tar.addfile(info, handle)
        else:
            tar.addfile(info)


def write_layer(target: Path, entries: Entries) -> str:
    """Write a gzipped layer tar; the sha256 of the uncompressed tar (the layer's diff_id)."""
    digest = hashlib.sha256()

    class Hashed(io.RawIOBase):
        def __init__(self, sink: gzip.GzipFile) -> None:
            self.sink = sink

        def writable(self) -> bool:
            return True

        def write(self, data: bytes) -> int:  # type: ignore[override]
            digest.update(data)
            return self.sink.write(data)

    with target.open("wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=6) as zipped, \
            tarfile.open(fileobj=Hashed(zipped), mode="w|", format=tarfile.PAX_FORMAT) as tar:
        add(tar, entries)
    return "sha256:" + digest.hexdigest()


def compile_python(chroot: list[str], folder: str) -> None:
    """Byte code for every module under ``folder``, made by the image's Python, checked
    against nothing at import (the image's files never change): what Debian's py3compile
    would make at install, but reproducible, and no process in the image recompiles."""
    subprocess.run([*chroot, "/usr/bin/python3.11", "-m", "compileall", "-q", "-j", "1",
                    "--invalidation-mode", "unchecked-hash", folder],
                   env={"PATH": "/usr/bin"}, check=True, capture_output=True)


def as_root(root: Path) -> list[str]:
    """The command prefix that runs a program of ``root`` inside it."""
    chroot = [shutil.which("chroot") or "chroot", str(root)]
    if os.geteuid() != 0:
        chroot = [shutil.which("unshare") or "unshare", "--map-root-user", *chroot]
    return chroot


def identityctl_root(root: Path, pex: Path, entrypoint: Path) -> None:
    """The second layer's files, in ``root`` (on top of an unpacked Debian layer)."""
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                     f"identityctl:x:{UID}:{GID}::/data:/usr/sbin/nologin\n")
    (root / "etc/group").write_text(f"root:x:0:\nidentityctl:x:{GID}:\n")
    python = root / "usr/bin/python3"
    python.unlink(missing_ok=True)
    python.symlink_to("python3.11")
    for name, mode in (("data", 0o700), ("tmp", 0o1777), ("dev", 0o755), ("proc", 0o755),
                       (PEX_DIR, 0o755), ("usr/local/bin", 0o755)):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name).chmod(mode)
    shutil.copy(entrypoint, root / ENTRYPOINT.lstrip("/"))
    (root / ENTRYPOINT.lstrip("/")).chmod(0o755)
    # The PEX unpacks its venv once, here, by the image's Python at its path in the image.
    # The image then runs that venv: the .pex file itself would want to write to its PEX_ROOT
    # at every start (and unpack itself to /tmp again when it may not).
    opt = root / PEX_DIR
    shutil.copy(pex, opt / "identityctl.pex")
    chroot = as_root(root)
    subprocess.run([*chroot, "/usr/bin/python3", f"/{PEX_DIR}/identityctl.pex", "--version"],
                   env={"PEX_ROOT": f"/{PEX_DIR}/pex", "PATH": "/usr/bin"}, check=True,
                   capture_output=True)  # (pex warns that it finds no ldd: there is none)
    (opt / "identityctl.pex").unlink()
    # The byte code that run left behind records the unpacking's file times, which the layer
    # does not keep: compile it again from the sources' hashes instead.
    for cache in sorted((opt / "pex").rglob("__pycache__")):
        shutil.rmtree(cache)
    compile_python(chroot, f"/{PEX_DIR}/pex")
    for needed_only_by_the_pex_file in ("bootstraps", "interpreters", "isolated",
                                        "unzipped_pexes", "user_code", "access.lck"):
        path = opt / "pex" / needed_only_by_the_pex_file
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    venv, = {path.resolve().parent for path in (opt / "pex/venvs").glob("*/*/*/pyvenv.cfg")}
    (opt / "venv").symlink_to(venv.relative_to(opt.resolve()))
    command = root / IDENTITYCTL.lstrip("/")
    command.write_text(f"#!/{PEX_DIR}/venv/bin/python3 -I\n"
                       "import runpy\n\nrunpy.run_module('identityctl', run_name='__main__')\n")
    command.chmod(0o755)


def image_config(diff_ids: list[str], epoch: int) -> dict:
    health = ["CMD", "/usr/bin/python3", ENTRYPOINT, "health"]
    return {
        # The packages are the build machine's own (apt-get download), so is the image's.
        "architecture": subprocess.run(["dpkg", "--print-architecture"], check=True,
                                       capture_output=True, text=True).stdout.strip(),
        "os": "linux",
        "created": _utc(epoch),
        "config": {
            "User": f"{UID}:{GID}",
            "Entrypoint": ["/usr/bin/python3", ENTRYPOINT],
            "Cmd": ["serve"],
            "WorkingDir": "/data",
            "Volumes": {"/data": {}},
            "ExposedPorts": {f"{PORT}/tcp": {}},
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                    f"SSL_CERT_FILE=/{CA_BUNDLE}",
                    "IDENTITYCTL_CONFIG=/data/config.toml", "IDENTITYCTL_HOST=0.0.0.0",
                    f"IDENTITYCTL_PORT={PORT}"],
            # Docker's HEALTHCHECK (podman keeps it in the docker format): durations in ns.
            "Healthcheck": {"Test": health, "Interval": 30 * 10**9, "Timeout": 5 * 10**9,
                            "StartPeriod": 30 * 10**9, "Retries": 3},
            "Labels": {"org.opencontainers.image.title": "identityctl"},
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }


def _utc(epoch: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def blob(layout: Path, data: bytes | Path) -> tuple[str, int]:
    """Put ``data`` (bytes, or a file to move in) under blobs/sha256; its digest and size."""
    blobs = layout / "blobs/sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    if isinstance(data, Path):
        hasher = hashlib.sha256()
        with data.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                hasher.update(chunk)
        digest = hasher.hexdigest()
        shutil.copyfile(data, blobs / digest)
    else:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
    return "sha256:" + digest, (blobs / digest).stat().st_size


def identityctl_layer(debian: Path, debian_diff: str, pex: Path, entrypoint: Path,
                      ) -> tuple[Path, str]:
    """The cached second layer for this PEX, entrypoint, builder and Debian layer (made when
    missing) and its uncompressed digest."""
    key = digest_of([debian_diff, pex.read_bytes(), entrypoint.read_bytes(),
                     Path(__file__).read_bytes()])
    layer = CACHE / f"identityctl-{key}.tar.gz"
    if layer.exists():
        return layer, layer.with_suffix(".diffid").read_text()
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        root = Path(scratch)
        subprocess.run(["tar", "-xzf", str(debian), "-C", str(root)], check=True)
        before = {path.relative_to(root) for path in root.rglob("*")}
        identityctl_root(root, pex, entrypoint)
        added = (entry for entry in tree(root, owner=lambda name: (
            (UID, GID) if name == "data" else (0, 0))) if Path(entry[0].name) not in before)
        partial = layer.with_suffix(".partial")
        diff_id = write_layer(partial, added)
    layer.with_suffix(".diffid").write_text(diff_id)
    partial.rename(layer)
    return layer, diff_id


def build(pex: Path, entrypoint: Path, out: Path, tag: str, epoch: int) -> dict:
    CACHE.mkdir(parents=True, exist_ok=True)
    wanted = packages()
    debian, debian_diff = debian_layer(wanted)
    app, app_diff = identityctl_layer(debian, debian_diff, pex, entrypoint)
    layout = out / "oci"
    shutil.rmtree(layout, ignore_errors=True)
    layout.mkdir(parents=True)
    layers = [blob(layout, debian), blob(layout, app)]
    config = json.dumps(image_config([debian_diff, app_diff], epoch), sort_keys=True,
                        separators=(",", ":")).encode()
    config_digest, config_size = blob(layout, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest, "size": size} for digest, size in layers],
    }, sort_keys=True, separators=(",", ":")).encode()
    manifest_digest, manifest_size = blob(layout, manifest)
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (layout / "index.json").write_text(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": manifest_digest, "size": manifest_size,
                       "annotations": {"org.opencontainers.image.ref.name": tag.split(":")[-1],
                                       "io.containerd.image.name": tag}}]}, sort_keys=True))
    # docker load reads manifest.json (and, from Docker 25 on, index.json as well).
    (layout / "manifest.json").write_text(json.dumps([{
        "Config": f"blobs/sha256/{config_digest.split(':')[1]}", "RepoTags": [tag],
        "Layers": [f"blobs/sha256/{digest.split(':')[1]}" for digest, _ in layers]}]))
    archive = out / "identityctl-image.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, tree(layout, owner=lambda _: (0, 0)))
    return {"id": config_digest, "tag": tag, "layout": str(layout), "archive": str(archive),
            "packages": wanted,
            "compressed_bytes": sum(size for _, size in layers) + config_size,
            "layers": [str(layout / "blobs/sha256" / d.split(":")[1]) for d, _ in layers]}


def version() -> str:
    """identityctl's version, from the source tree the image is built from."""
    source = Path(__file__).resolve().parent.parent / "identityctl" / "__init__.py"
    return re.search(r'__version__ = "([^"]+)"', source.read_text())[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pex", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tag", default=f"identityctl:{version()}")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    arguments = parser.parse_args()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    arguments.out.mkdir(parents=True, exist_ok=True)
    made = build(arguments.pex.resolve(), Path(__file__).with_name("entrypoint.py"),
                 arguments.out.resolve(), arguments.tag, epoch)
    if arguments.json:
        print(json.dumps(made))
    else:
        print(f"image {made['tag']} id {made['id']}, {made['compressed_bytes'] / 1e6:.1f} MB "
              f"compressed, {len(made['packages'])} Debian packages\n"
              f"  OCI layout: {made['layout']}\n  docker load -i {made['archive']}")


if __name__ == "__main__":
    sys.exit(main())
