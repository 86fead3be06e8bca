"""The container image: ./build_image.sh makes it from Debian's packages and the PEX, and it
runs as an image does. Its entrypoint makes the deployment in the volume /data from the
environment on the first start (base URL, first administrator), serves, answers its
HEALTHCHECK, signs a person in through the OpenID Connect code flow, and keeps its data
across a restart on the same volume; once more on PostgreSQL.

No container engine runs on this machine, so the test plays one: it unpacks the layers the
OCI layout lists into a root, then starts the image's Entrypoint and Cmd with its Env, as
its User, with the volume bound at /data, /dev and /proc, in a mount namespace of its own
(`unshare --mount`, `chroot`; as root). The network is the host's, so each run is given a
port of its own through IDENTITYCTL_PORT. It skips, saying why, without root, apt-get,
dpkg-deb, unshare or chroot, or where the Debian packages cannot be downloaded.

The image is built once per module. Between runs ~/.cache/identityctl-image (or
$IDENTITYCTL_IMAGE_CACHE) keeps the PEX, keyed by the sources it is built from
(tests/support/pex.py), and the layers, keyed by what they are made of (deploy/image.py):
with nothing changed, the build takes seconds.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from identityctl.config import load_config
from tests.conftest import Service, free_port
from tests.support.authenticator import SoftAuthenticator
from tests.support.oauth import OAuthDriver, RegisteredClient
from tests.support.passkeys import PasskeyClient
from tests.support.pex import built_pex
from tests.support.postgres import empty_database
from tests.support.processes import stop, wait_for_health

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("apt-get", "dpkg-deb", "unshare", "chroot", "mount")
ADMIN = "ada@example.com"
REDIRECT_URI = "https://app.example/callback"
#: build_image.sh's exit status when apt could not download the packages (deploy/image.py).
NO_DOWNLOAD = 3


@dataclass
class Image:
    """The built image: its OCI layout, its config and its layers unpacked into ``root``."""

    layout: Path
    manifest: dict[str, Any]
    config: dict[str, Any]
    root: Path
    build_output: str

    def blob(self, digest: str) -> Path:
        return self.layout / "blobs" / "sha256" / digest.removeprefix("sha256:")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    if os.geteuid() != 0:
        pytest.skip("the image test runs the image in a chroot and needs root")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the image test needs {', '.join(missing)} (Debian: apt-get install "
                    "util-linux coreutils mount dpkg)")
    if not any(Path("/var/lib/apt/lists").glob("*_Packages*")):
        pytest.skip("apt has no package lists to build the image from (run apt-get update)")
    out = tmp_path_factory.mktemp("image")
    built = subprocess.run([str(REPO / "build_image.sh"), str(out)], cwd=REPO,
                           env={**os.environ, "PEX": str(built_pex())}, capture_output=True,
                           text=True, timeout=900)
    if built.returncode == NO_DOWNLOAD:
        pytest.skip(f"the Debian packages could not be downloaded: {built.stderr.strip()}")
    assert built.returncode == 0, built.stdout + built.stderr
    found = Image(layout=out / "oci", manifest={}, config={}, root=out / "root",
                  build_output=built.stdout)
    index = json.loads((found.layout / "index.json").read_text())
    found.manifest = json.loads(found.blob(index["manifests"][0]["digest"]).read_text())
    found.config = json.loads(found.blob(found.manifest["config"]["digest"]).read_text())
    found.root.mkdir()
    for layer in found.manifest["layers"]:  # in order, as a container runtime stacks them
        subprocess.run(["tar", "-xzpf", str(found.blob(layer["digest"])), "--numeric-owner",
                        "-C", str(found.root)], check=True)
    return found


@dataclass
class Container:
    """One run of the image on a volume: its process, address and a way to run commands in
    it (like `docker exec`)."""

    image: Image
    volume: Path
    port: int
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.volume.with_name(f"{self.volume.name}.log")

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run as the image's User, in the image's root with the volume at /data."""
        tool = {name: shutil.which(name) for name in ("mount", "chroot")}
        root = shlex.quote(str(self.image.root))
        mounts = (f"{tool['mount']} --bind {shlex.quote(str(self.volume))} {root}/data && "
                  f"{tool['mount']} --rbind /dev {root}/dev && "
                  f"{tool['mount']} -t proc proc {root}/proc && "
                  f"exec {tool['chroot']} --userspec={self.settings['User']} {root} \"$@\"")
        return [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private",
                "--", "/bin/sh", "-c", mounts, "sh", *argv]

    @property
    def settings(self) -> dict[str, Any]:
        return self.image.config["config"]

    def environment(self) -> dict[str, str]:
        """The image's Env and the run's: its port (the network is the host's) and public
        address."""
        image_env = dict(item.split("=", 1) for item in self.settings["Env"])
        return {**image_env, "IDENTITYCTL_PORT": str(self.port),
                "IDENTITYCTL_HOST": "127.0.0.1",
                "IDENTITYCTL_BASE_URL": f"http://localhost:{self.port}", **self.env}

    def start(self) -> Service:
        """The Entrypoint with the Cmd, until /health answers."""
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command([*self.settings["Entrypoint"], *self.settings["Cmd"]]),
                stdout=log, stderr=log, env=self.environment())
        base_url = f"http://localhost:{self.port}"
        wait_for_health(f"{base_url}/health", self.process, self.log)
        return Service(config=load_config(self.volume / "config.toml"),
                       config_path=self.volume / "config.toml", base_url=base_url,
                       http=requests.Session())

    def stop(self) -> None:
        assert self.process is not None
        stop(self.process)
        assert self.process.returncode == 0, self.log.read_text()
        assert "Traceback" not in self.log.read_text()

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv), capture_output=True, text=True,
                              timeout=120, env={**self.environment(), "COLUMNS": "200"})

    def exec(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The Entrypoint with ``args``: an identityctl command in the running container."""
        return self.run([*self.settings["Entrypoint"], *args])

    def json(self, *args: str) -> Any:
        done = self.exec(*args, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    def healthcheck(self) -> int:
        """The exit status of the image's HEALTHCHECK command."""
        kind, *argv = self.settings["Healthcheck"]["Test"]
        assert kind == "CMD"
        return self.run(argv).returncode


@contextmanager
def running(image: Image, volume: Path, port: int,
            **env: str) -> Iterator[tuple[Container, Service]]:
    container = Container(image, volume, port, env)
    service = container.start()
    try:
        yield container, service
    finally:
        service.http.close()
        container.stop()


def new_volume(tmp_path: Path) -> Path:
    """An empty volume, owned as the image's /data is (a runtime copies that to a new one)."""
    volume = tmp_path / "data"
    volume.mkdir()
    os.chown(volume, 10001, 10001)
    return volume


@dataclass
class Administrator:
    """The first administrator (IDENTITYCTL_ADMIN_EMAIL), with a passkey, and an application
    to sign in to."""

    person: SimpleNamespace  # the OAuth driver keeps only the id of who signs in
    authenticator: SoftAuthenticator
    client: RegisteredClient

    @classmethod
    def enrolled(cls, container: Container, service: Service) -> Administrator:
        """A passkey for the administrator, enrolled with an operator's admin token, and a new
        application, both made with identityctl commands in the container."""
        person = SimpleNamespace(id=container.json("user", "show", ADMIN)["id"])
        token = container.exec("token", "--scope", "system")
        assert token.returncode == 0, token.stderr
        authenticator = SoftAuthenticator()
        PasskeyClient(service, _admin_token=token.stdout.strip()).enrolled(
            person, authenticator)  # type: ignore[arg-type]
        made = container.json("app", "create", "--template", "SPA", "--name", "Shop",
                              "--redirect-uri", REDIRECT_URI)
        oauth = made["inboundAuthConfig"][0]["config"]
        client = RegisteredClient(application_id=made["id"], client_id=oauth["clientId"],
                                  secret=None, redirect_uri=REDIRECT_URI,
                                  auth_method=oauth["tokenEndpointAuthMethod"])
        return cls(person, authenticator, client)

    def sign_in(self, service: Service) -> dict[str, Any]:
        """The code flow with the passkey: the ID token's claims, checked against the
        published keys."""
        rp = OAuthDriver(service)
        authorization = rp.authorization(self.client, scope="openid email",
                                         person=(self.person, self.authenticator))  # type: ignore[arg-type]
        claims = rp.verified(rp.tokens(authorization)["id_token"],
                             audience=self.client.client_id)
        assert claims["sub"] == self.person.id
        return claims


def test_the_image_is_an_oci_layout_of_two_layers_with_its_runtime_settings(
        image: Image) -> None:
    settings = image.config["config"]
    assert settings["User"] == "10001:10001"
    assert settings["Volumes"] == {"/data": {}}
    assert settings["Cmd"] == ["serve"]
    assert "IDENTITYCTL_CONFIG=/data/config.toml" in settings["Env"]
    manifest = image.manifest
    assert f"id {manifest['config']['digest']}" in image.build_output  # the id it prints
    diff_ids = image.config["rootfs"]["diff_ids"]
    assert len(manifest["layers"]) == len(diff_ids) == 2
    for layer, diff_id in zip(manifest["layers"], diff_ids, strict=True):
        packed = image.blob(layer["digest"]).read_bytes()
        assert "sha256:" + hashlib.sha256(packed).hexdigest() == layer["digest"]
        unpacked = gzip.decompress(packed)
        assert "sha256:" + hashlib.sha256(unpacked).hexdigest() == diff_id
        with tarfile.open(fileobj=io.BytesIO(unpacked)) as tar:
            members = tar.getmembers()
        assert [member.name for member in members] == sorted(member.name for member in members)
        assert {member.mtime for member in members} == {members[0].mtime}  # one fixed time
    docker = json.loads((image.layout / "manifest.json").read_text())  # what docker load reads
    assert docker[0]["Config"] == f"blobs/sha256/{manifest['config']['digest'][7:]}"
    # Debian's Python and libraries, identityctl's venv; no shell, no package manager.
    assert (image.root / "usr/bin/python3.11").is_file()
    assert not (image.root / "bin/sh").exists() and not (image.root / "usr/bin/apt").exists()
    assert (image.root / "data").stat().st_uid == 10001
    # Only /data and /tmp are the service user's to write: the code and Python are root's.
    writable = [path for path in image.root.rglob("*") if not path.is_symlink()
                and (path.stat().st_uid != 0 or path.stat().st_mode & 0o002)]
    assert sorted(path.relative_to(image.root).as_posix() for path in writable) == [
        "data", "tmp"]


def test_first_start_initialises_the_volume_and_a_restart_keeps_it(
        image: Image, tmp_path: Path) -> None:
    volume, port = new_volume(tmp_path), free_port()
    with running(image, volume, port, IDENTITYCTL_ADMIN_EMAIL=ADMIN) as (container, service):
        health = service.get("/health")
        assert health.status_code == 200 and health.json()["database"] == "ok"
        assert container.healthcheck() == 0
        assert service.config.base_url == f"http://localhost:{port}"  # IDENTITYCTL_BASE_URL
        for name in ("config.toml", "identityctl.db"):  # state under the one volume
            made = (volume / name).stat()
            assert (made.st_uid, made.st_mode & 0o777) == (10001, 0o600), name
        assert f"created the administrator {ADMIN}" in container.log.read_text()
        assert f"http://localhost:{port}/account/enrol#" in container.log.read_text()
        admin = Administrator.enrolled(container, service)
        assert admin.sign_in(service)["email"] == ADMIN
        keys = service.get("/oauth2/jwks").json()
    assert container.healthcheck() == 1  # stopped
    started_once = container.log.read_text()

    with running(image, volume, port) as (container, service):
        assert service.get("/oauth2/jwks").json() == keys  # the same signing key
        assert admin.sign_in(service)["email"] == ADMIN  # the same passkey and application
    assert container.log.read_text().count("wrote /data/config.toml") == 1  # init ran once
    assert started_once.count("listening on") == 1


def test_on_postgresql_the_volume_holds_only_the_config(image: Image, tmp_path: Path) -> None:
    server = os.environ.get("IDENTITYCTL_TEST_PG_URL")
    if not server:
        pytest.skip("IDENTITYCTL_TEST_PG_URL is not set (scripts/test.sh starts PostgreSQL)")
    with empty_database(server) as database_url:
        volume, port = new_volume(tmp_path), free_port()
        with running(image, volume, port, IDENTITYCTL_DATABASE_URL=database_url,
                     IDENTITYCTL_ADMIN_EMAIL=ADMIN) as (container, service):
            assert service.get("/health").json()["database"] == "ok"
            assert service.config.database_url == database_url
            assert Administrator.enrolled(container, service).sign_in(service)["email"] == ADMIN
        assert sorted(path.name for path in volume.iterdir()) == ["config.toml"]
