"""A real Kubernetes control plane on 127.0.0.1 for the cloud provisioner's tests: etcd,
kube-apiserver, kube-controller-manager and kube-scheduler built from the Go module proxy
(scripts/tools.sh; tests/kube/ pins them), and kwok, which plays the kubelets of fake
nodes so that scheduled pods become Running and Ready. No container runs: this checks what the API
server, the controllers and the scheduler make of the provisioner's objects, which is all the
provisioner talks to."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from kubernetes import client as k8s

from sfubench.config import ROOT

ADMIN_TOKEN = "sfubench-admin-token"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
NODE_LEASE_S = 40   # a kubelet's default


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tools(*args: str) -> str:
    r = subprocess.run([str(ROOT / "scripts" / "tools.sh"), *args], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"tools.sh {args} failed")
    return r.stdout.strip().splitlines()[-1]


def kwok_stages() -> str:
    """kwok's own "fast" stages (nodes Ready at once, pods Ready at once, deleted pods removed), as
    its module of the pinned version ships them: kwok needs them to play a kubelet."""
    version = _tools("--version", "kwok")
    r = subprocess.run(["go", "mod", "download", "-json", f"sigs.k8s.io/kwok@v{version}"],
                       capture_output=True, text=True, cwd=ROOT / "tests" / "kube")
    if r.returncode:
        raise RuntimeError(f"go mod download sigs.k8s.io/kwok@v{version}: {r.stderr.strip()}")
    folder = Path(json.loads(r.stdout)["Dir"]) / "kustomize" / "stage" / "fast"
    return subprocess.run([_tools("--path", "kustomize"), "build", str(folder)], capture_output=True,
                          text=True, check=True).stdout


def binaries() -> dict[str, str]:
    """The control plane's programs, built once per version (a cold build takes minutes)."""
    return {name: _tools("--path", name) for name in BINARIES}


class ControlPlane:
    def __init__(self, work: Path):
        self.work = work
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.port = _free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = work / "kubeconfig"

    def start(self, timeout: float = 90) -> "ControlPlane":
        bins = binaries()
        w = self.work
        for d in ("etcd", "certs"):
            (w / d).mkdir(parents=True, exist_ok=True)
        sa_key = w / "certs" / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
        (w / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
        etcd_client, etcd_peer = _free_port(), _free_port()
        self._spawn("etcd", [bins["etcd"], "--data-dir", str(w / "etcd"), "--name", "sfubench",
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_client}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_client}",
                             "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                             "--initial-cluster", f"sfubench=http://127.0.0.1:{etcd_peer}"])
        self._spawn("kube-apiserver", [
            bins["kube-apiserver"], f"--etcd-servers=http://127.0.0.1:{etcd_client}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--cert-dir={w / 'certs'}", f"--service-account-key-file={sa_key}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc", "--api-audiences=sfubench",
            f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/24", "--enable-priority-and-fairness=false"])
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters: [{{name: local, cluster: {{server: '{self.url}', certificate-authority: '{w / 'certs' / 'apiserver.crt'}'}}}}]\n"
            f"users: [{{name: admin, user: {{token: {ADMIN_TOKEN}}}}}]\n"
            "contexts: [{name: local, context: {cluster: local, user: admin}}]\ncurrent-context: local\n")
        self._wait_api(timeout)
        self._spawn("kube-controller-manager", [bins["kube-controller-manager"], f"--kubeconfig={self.kubeconfig}",
                                                "--leader-elect=false", "--bind-address=127.0.0.1",
                                                f"--secure-port={_free_port()}",
                                                f"--service-account-private-key-file={sa_key}",
                                                "--use-service-account-credentials=false",
                                                # beta since 1.36: the ReplicaSet controller waits until its
                                                # cache has seen its own last write; here it once left a new
                                                # ReplicaSet without pods for 300 s (the CI run of 2026-11-23)
                                                "--feature-gates=StaleControllerConsistencyReplicaSet=false"])
        self._spawn("kube-scheduler", [bins["kube-scheduler"], f"--kubeconfig={self.kubeconfig}",
                                       "--leader-elect=false", "--bind-address=127.0.0.1",
                                       f"--secure-port={_free_port()}"])
        (w / "kwok.yaml").write_text(kwok_stages())
        # The node lease is a kubelet's heartbeat. Without it (kwok's default, and the "fast" stages
        # have none) the node-lifecycle controller finds every fake node silent after its grace period
        # (50 s), marks the node's pods not Ready and kwok re-initialises the node, but never those
        # pods: a pod made just before that stayed not Ready, which failed CI runs as a "hub never
        # ready". kwok renews the lease every quarter of its duration, as a kubelet does.
        self._spawn("kwok", [bins["kwok"], f"--kubeconfig={self.kubeconfig}", f"--config={w / 'kwok.yaml'}",
                             "--manage-all-nodes=false",
                             "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                             f"--node-lease-duration-seconds={NODE_LEASE_S}",
                             "--server-address=127.0.0.1:0", "--node-ip=127.0.0.1"])
        return self

    def api(self, token: str = ADMIN_TOKEN) -> k8s.ApiClient:
        c = k8s.Configuration()
        c.host = self.url
        c.ssl_ca_cert = str(self.work / "certs" / "apiserver.crt")   # self-signed, for 127.0.0.1
        c.api_key = {"authorization": f"Bearer {token}"}
        return k8s.ApiClient(c)

    def add_node(self, name: str, cpu: str = "4", memory: str = "8Gi") -> None:
        """A fake node that kwok keeps Ready, with `cpu` and `memory` for the scheduler to fill."""
        k8s.CoreV1Api(self.api()).create_node(k8s.V1Node(
            metadata=k8s.V1ObjectMeta(name=name, annotations={"kwok.x-k8s.io/node": "fake"},
                                      labels={"type": "kwok"}),
            status=k8s.V1NodeStatus(allocatable={"cpu": cpu, "memory": memory, "pods": "110"},
                                    capacity={"cpu": cpu, "memory": memory, "pods": "110"})))

    def stop(self) -> None:
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p in reversed(self.procs):
            try:   # kube-apiserver drains its requests for more than a test's cluster needs: killed
                p.wait(2)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {name}:\n" + (self.work / f"{name}.log").read_text(errors="replace")[-1500:]
                         for name, _ in self.procs)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.work / f"{name}.log", "wb")
        env = {**os.environ, "HOME": str(self.work)}
        self.procs.append((name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, env=env)))

    def _wait_api(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        version = k8s.VersionApi(self.api())
        while True:
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode}:\n{self.logs()}")
            try:
                version.get_code(_request_timeout=2)
                k8s.CoreV1Api(self.api()).list_namespace(_request_timeout=2)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kube-apiserver not ready after {timeout:.0f} s:\n{self.logs()}") from None
                time.sleep(0.3)
