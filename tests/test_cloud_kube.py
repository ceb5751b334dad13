"""The cloud grid's provisioner against a real control plane (tests/support/controlplane.py): the manifests
of k8s/ applied, the Chrome nodes scaled with the rooms, the runner's Role confined to its
namespace, and the teardown. Every assertion reads the API server's own state."""
from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from datetime import datetime, timedelta, timezone

import kubernetes_validate
import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from sfubench import config
from sfubench import grid as grid_mod
from sfubench.cloud import courier as courier_mod
from sfubench.cloud import kube, sweep
from sfubench.sfu import Adapter
from sfubench.sites import RemoteSite

from support.controlplane import NODE_LEASE_S, ControlPlane
from support.tiers import full

OVERLAYS = ["base"] + sorted(p.name for p in (kube.MANIFESTS / "overlays").iterdir())

RUN_TOKEN = secrets.token_urlsafe(16)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_manifests_validate_strictly(overlay):
    """Every overlay's `kustomize build` output passes the Kubernetes schemas with unknown fields
    refused (kubernetes-validate --strict), as the suite's cluster version sees them."""
    objects = kube.render(overlay)
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} >= {
        ("Deployment", "selenium-hub"), ("Deployment", "chrome-node"), ("Deployment", "synth"), ("Service", "selenium-hub"),
        ("Role", "sfubench-runner"), ("RoleBinding", "sfubench-runner"), ("Namespace", "sfubench")}
    for o in objects:
        kubernetes_validate.validate(o, "1.36", strict=True)
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")], \
        "the runner's rights must stay inside its namespace"


def test_validation_catches_a_broken_manifest():
    """The check above can fail: a misspelt field is refused."""
    node = next(o for o in kube.render("base") if o["metadata"]["name"] == "chrome-node")
    node["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(node, "1.36", strict=True)


def test_kustomize_reports_a_missing_overlay():
    with pytest.raises(kube.KubeError, match="no kustomize overlay 'gcp'; there are: base, aws, small"):
        kube.render("gcp")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cp = ControlPlane(tmp_path_factory.mktemp("controlplane"))
    try:
        cp.start()
        for i in range(2):
            cp.add_node(f"fake-{i}", cpu="2", memory="4Gi")
        yield cp
    except BaseException:
        print(cp.logs())
        raise
    finally:
        cp.stop()


def test_fake_nodes_keep_a_kubelets_heartbeat(cluster):
    """kwok renews every fake node's Lease as a kubelet does. Without it the node-lifecycle
    controller took a node for dead after 50 s and marked its pods not Ready, which kwok never undid:
    the provisioner then waited in vain for a hub that had been Ready."""
    leases = k8s.CoordinationV1Api(cluster.api())

    def lease():
        try:
            return leases.read_namespaced_lease("fake-0", "kube-node-lease").spec
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    deadline = time.monotonic() + 30
    while (first := lease()) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert first is not None, "kwok made no Lease for its node"
    assert first.holder_identity and first.lease_duration_seconds == NODE_LEASE_S
    # renewed at a quarter of the duration (10 s); the node-lifecycle controller waits 50 s
    deadline = time.monotonic() + NODE_LEASE_S / 2 + 5
    while lease().renew_time == first.renew_time and time.monotonic() < deadline:
        time.sleep(0.5)
    assert lease().renew_time > first.renew_time


def _ready_pods(core, namespace: str, name: str) -> int:
    """Ready pods of a Deployment, not being deleted, as the API server has them."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/name={name}").items
    return sum(1 for p in pods if p.metadata.deletion_timestamp is None
               and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []))


def _cfg(**kw):
    """A cloud run's settings, the "auto" ones resolved as cloud-loadtest resolves them."""
    return config.load(cli={"sfu": "janus", "users_per_room": 5, "participants_per_browser": 1, **kw}, env={},
                       site=RemoteSite)


def test_node_count_follows_rooms_sessions_and_participants_per_browser():
    grid = kube.KubeGrid(None, "x", kube.GridSpec(objects=kube.render("small")))
    assert grid.sessions_per_node == 2
    assert [grid.nodes_for(_cfg(), rooms) for rooms in (1, 2, 3)] == [3, 5, 8]   # 5, 10, 15 sessions
    # 0.65 core a node carries 2 participants: sessions alone would put 15 participants in 3 tabs on 2
    assert grid.participants_per_node == 2
    assert grid.nodes_for(_cfg(participants_per_browser=5), 3) == 8
    assert grid.nodes_for(config.load(cli={"sfu": "janus"}, env={}, site=RemoteSite), 3) == 11  # 21 in 3 tabs
    assert grid.nodes_for(_cfg(real_per_room=2, real_rooms=1), 4) == 1          # 2 browsers at most


def test_generator_count_follows_the_streams_the_synthetic_participants_receive():
    grid = kube.KubeGrid(None, "x", kube.GridSpec(objects=kube.render("base"), sfu="livekit"))
    assert grid.streams_per_generator == 240
    assert grid.generators_for(_cfg(), 5) == 0                                   # browsers only
    # rooms of 5 with 1 browser: 4 synthetic participants a room, each receiving 4 streams
    assert [grid.generators_for(_cfg(real_per_room=1), rooms) for rooms in (1, 15, 16)] == [1, 1, 2]
    assert grid.generators_for(_cfg(real_rooms=0), 12) == 1                      # 60 x 4 = 240
    synth = next(o for o in grid.objects if o["metadata"]["name"] == "synth")
    env = {e["name"]: e.get("value") for e in synth["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SFUBENCH_SFU"] == "livekit"


def test_pods_run_the_runners_commit_and_check_its_media():
    """The sfubench image by the runner's commit (a tag that never moves), every other image as
    pinned; each node's init container told the run's media profile and the runner's digest."""
    grid = kube.KubeGrid(None, "x", kube.GridSpec(objects=kube.render("aws"), commit="b940d9a", media=("paper", "d1g35t")))
    images = {c["name"]: (c["image"], c.get("imagePullPolicy")) for c in grid._containers()}
    assert images["media"] == images["synth"] == ("ghcr.io/sfubench/sfubench:b940d9a", "IfNotPresent")
    assert images["chrome"][0] == "selenium/node-chrome:4.47.0"
    init = next(c for c in grid._containers() if c["name"] == "media")
    assert {e["name"]: e["value"] for e in init["env"]} == {"SFUBENCH_MEDIA": "paper", "SFUBENCH_MEDIA_DIGEST": "d1g35t"}
    assert '--expect-digest "$SFUBENCH_MEDIA_DIGEST"' in init["command"][-1]


def test_generators_scale_with_a_rooms_synthetic_participants(cluster):
    """A room of 5 with 1 browser: a Chrome node and a generator of the run's SFU, both ready before
    the room's participants join, and the generator reachable at its pod's address."""
    api = cluster.api()
    core = k8s.CoreV1Api(api)
    grid = kube.KubeGrid(api, "sfubench-t3", kube.GridSpec(overlay="small", sfu="inhouse"))
    try:
        grid.deploy(timeout=120)
        handler, _ = grid.listener(_cfg(real_per_room=1), timeout=120)
        handler("events", {"event": "room_started", "room": 1})
        assert (grid.nodes, grid.generators) == (1, 1)
        assert _ready_pods(core, "sfubench-t3", "synth") == 1
        pod = core.list_namespaced_pod("sfubench-t3", label_selector="app.kubernetes.io/name=synth").items[0]
        assert {e.name: e.value for e in pod.spec.containers[0].env}["SFUBENCH_SFU"] == "inhouse"
        assert grid.addresses("synth") == [pod.status.pod_ip] and pod.status.pod_ip
    finally:
        grid.teardown(timeout=120)


def test_deploy_scale_with_rooms_and_teardown(cluster):
    api = cluster.api()
    run = {sweep.RUN_TAG: "r20261205120000", sweep.OWNER_TAG: "ci", sweep.DEADLINE_TAG: "2026-12-05T14:00:00Z"}
    grid = kube.KubeGrid(api, "sfubench-t1", kube.GridSpec(overlay="small", token=RUN_TOKEN, runner_cidr="10.20.0.5/32",
                                                           run=run))
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    try:
        grid.reach_sfu("10.42.0.9")
        grid.deploy(timeout=120)
        assert _ready_pods(core, "sfubench-t1", "selenium-hub") == 1
        # the run's token in the Secret the pods read, the runner alone admitted, Pod Security on
        secret = core.read_namespaced_secret("sfubench-run", "sfubench-t1")
        assert base64.b64decode(secret.data["token"]).decode() == RUN_TOKEN
        policy = k8s.NetworkingV1Api(api).read_namespaced_network_policy("runner-only", "sfubench-t1")
        assert policy.spec.ingress[1]._from[0].ip_block.cidr == "10.20.0.5/32"
        # out of the namespace, the pods reach the cluster's DNS, the runner and the SFU host only
        assert policy.spec.policy_types == ["Ingress", "Egress"]
        outside = [peer for rule in policy.spec.egress for peer in rule.to if peer.ip_block]
        assert [p.ip_block.cidr for p in outside] == ["10.20.0.5/32", "10.42.0.9/32"]
        assert not [p.ip_block._except for p in outside if p.ip_block._except]
        dns = [rule for rule in policy.spec.egress if any(p.namespace_selector is not None for p in rule.to)]
        assert len(dns) == 1 and {p.port for p in dns[0].ports} == {53}
        meta = core.read_namespace("sfubench-t1").metadata
        assert meta.labels["pod-security.kubernetes.io/enforce"] == "restricted"   # the pods above were admitted
        # the run's tags, by which the tag sweeper finds the namespace once its runner is gone
        assert meta.labels[sweep.NS_RUN] == "r20261205120000"
        assert (meta.annotations[sweep.NS_OWNER], meta.annotations[sweep.NS_DEADLINE]) == ("ci", "2026-12-05T14:00:00Z")
        # the hub by its Ready pod's address, as a runner in the VPC reaches it (no cluster DNS)
        (hub,) = core.list_namespaced_pod("sfubench-t1", label_selector="app.kubernetes.io/name=selenium-hub").items
        assert grid.url() == f"http://{hub.status.pod_ip}:4444" and hub.status.pod_ip
        binding = k8s.RbacAuthorizationV1Api(api).read_namespaced_role_binding("sfubench-runner", "sfubench-t1")
        assert binding.subjects[0].namespace == "sfubench-t1"

        # the run's events drive the scaling: room 1 of 5 browsers needs 3 nodes of 2 sessions
        handler, streams = grid.listener(_cfg(), timeout=120)
        assert streams == ["events"]
        handler("events", {"event": "room_started", "room": 1})
        assert apps.read_namespaced_deployment("chrome-node", "sfubench-t1").spec.replicas == 3
        assert _ready_pods(core, "sfubench-t1", "chrome-node") == 3
        pods = core.list_namespaced_pod("sfubench-t1", label_selector="app.kubernetes.io/name=chrome-node").items
        assert len(pods) == 3 and all(p.status.phase == "Running" and p.spec.node_name for p in pods)
        assert {c.name for c in pods[0].spec.init_containers} == {"media"}
        handler("events", {"event": "participant_joined", "room": 1})   # other events change nothing
        assert grid.nodes == 3

        # the clients' probe reads each Ready node's agent at its pod's address (kwok's pods are
        # not there to answer: only the addresses are checked, no request is sent)
        addresses = grid.addresses("chrome-node")
        assert sorted(addresses) == sorted(p.status.pod_ip for p in pods) and len(set(addresses)) == 3
        node = pods[0].spec.containers[0]
        assert "agent.py --role clients" in " ".join(node.command) and 9470 in [p.container_port for p in node.ports]
        token_env = next(e for e in node.env if e.name == "SFUBENCH_RUN_TOKEN")
        assert token_env.value_from.secret_key_ref.name == "sfubench-run"

        # beside the hub's 500m, 5 nodes of 650m fill the two fake nodes of 2 cores; a 6th cannot be placed
        with pytest.raises(kube.KubeError, match="6 Chrome node"):
            grid.scale(6, timeout=8)
        def phases():
            pods = core.list_namespaced_pod("sfubench-t1", label_selector="app.kubernetes.io/name=chrome-node").items
            unschedulable = [p for p in pods if any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                                                    for c in p.status.conditions or [])]
            return sum(p.status.phase == "Running" for p in pods), len(unschedulable)
        deadline = time.monotonic() + 60
        while phases() != (5, 1) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert phases() == (5, 1)
        grid.scale(2, timeout=120)
        assert _ready_pods(core, "sfubench-t1", "chrome-node") == 2
    finally:
        grid.teardown(timeout=120)
    names = [n.metadata.name for n in core.list_namespace().items]
    assert "sfubench-t1" not in names


def test_private_images_are_pulled_with_the_registrys_credentials(cluster, tmp_path, monkeypatch):
    """SFUBENCH_PULL_SECRET_FILE (a Docker config.json) becomes the namespace's pull Secret, which
    every pod of the grid pulls with; a file that is not one is named among what the run lacks."""
    from sfubench.cloud import run as cloud_run
    docker_config = json.dumps({"auths": {"registry.example": {"auth": base64.b64encode(b"ci:x").decode()}}})
    api = cluster.api()
    core = k8s.CoreV1Api(api)
    grid = kube.KubeGrid(api, "sfubench-t4", kube.GridSpec(overlay="small", token=RUN_TOKEN, pull_secret=docker_config))
    try:
        grid.deploy(timeout=120)
        secret = core.read_namespaced_secret(kube.PULL_SECRET, "sfubench-t4")
        assert secret.type == "kubernetes.io/dockerconfigjson"
        assert base64.b64decode(secret.data[".dockerconfigjson"]).decode() == docker_config
        (hub,) = core.list_namespaced_pod("sfubench-t4", label_selector="app.kubernetes.io/name=selenium-hub").items
        assert [s.name for s in hub.spec.image_pull_secrets] == [kube.PULL_SECRET]
        deployments = k8s.AppsV1Api(api).list_namespaced_deployment("sfubench-t4").items
        assert deployments and all([s.name for s in d.spec.template.spec.image_pull_secrets] == [kube.PULL_SECRET]
                                   for d in deployments)
    finally:
        grid.teardown(timeout=120)
    assert not any(o["kind"] == "Secret" and o["metadata"]["name"] == kube.PULL_SECRET
                   for o in kube.KubeGrid(api, "sfubench-t5", kube.GridSpec(overlay="small")).objects)

    bad = tmp_path / "config.json"
    bad.write_text("{}")
    monkeypatch.setenv("SFUBENCH_PULL_SECRET_FILE", str(bad))
    lacking = cloud_run.missing(cloud_run.CLOUDS["aws"], _cfg())
    assert any(line.startswith(f"SFUBENCH_PULL_SECRET_FILE ({bad}): a Docker config.json") for line in lacking)


def test_runner_role_is_confined_to_its_namespace(cluster):
    """With the token of the runner's ServiceAccount (the Role of k8s/base) the grid can be scaled,
    and nothing outside its namespace can be read or changed."""
    admin = cluster.api()
    grid = kube.KubeGrid(admin, "sfubench-t2", kube.GridSpec(overlay="small"))
    try:
        grid.deploy(timeout=120)
        token = k8s.CoreV1Api(admin).create_namespaced_service_account_token(
            "sfubench-runner", "sfubench-t2",
            k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=["sfubench"]))).status.token
        runner = kube.KubeGrid(cluster.api(token), "sfubench-t2", kube.GridSpec(overlay="small"))
        runner.scale(1, timeout=120)
        assert k8s.AppsV1Api(admin).read_namespaced_deployment("chrome-node", "sfubench-t2").spec.replicas == 1
        core = k8s.CoreV1Api(cluster.api(token))
        with pytest.raises(ApiException) as e:
            core.list_namespaced_pod("default")
        assert e.value.status == 403
        with pytest.raises(ApiException) as e:
            core.delete_namespace("sfubench-t2")
        assert e.value.status == 403
        # nor can it read the run's token, or change what the grid is
        with pytest.raises(ApiException) as e:
            core.read_namespaced_secret("sfubench-run", "sfubench-t2")
        assert e.value.status == 403
        with pytest.raises(ApiException) as e:
            k8s.AppsV1Api(cluster.api(token)).delete_namespaced_deployment("selenium-hub", "sfubench-t2")
        assert e.value.status == 403
    finally:
        grid.teardown(timeout=120)


def test_a_pod_the_restricted_profile_refuses_is_never_created(cluster):
    """The namespace enforces Pod Security's restricted profile: the hub stripped of its security
    context (root allowed, capabilities kept) never gets a pod, and the server says why."""
    objects = kube.render("small")
    hub = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "selenium-hub")
    del hub["spec"]["template"]["spec"]["securityContext"]
    del hub["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    grid = kube.KubeGrid(cluster.api(), "sfubench-t5", kube.GridSpec(objects=objects))
    core = k8s.CoreV1Api(cluster.api())
    try:
        with pytest.raises(kube.KubeError, match="refuses its pods: .*violates PodSecurity"):
            grid.deploy(timeout=120)   # said as soon as the controller is refused, not at the timeout
        assert not core.list_namespaced_pod("sfubench-t5").items
        reasons = " ".join(e.message or "" for e in core.list_namespaced_event("sfubench-t5").items)
        assert "violates PodSecurity \"restricted" in reasons, reasons
    finally:
        grid.teardown(timeout=120)


def test_deploy_refuses_what_the_api_server_refuses(cluster):
    """An object the server rejects stops the deploy with the server's reason."""
    objects = kube.render("small")
    hub = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "selenium-hub")
    hub["spec"]["replicas"] = -1
    grid = kube.KubeGrid(cluster.api(), "sfubench-t3", kube.GridSpec(objects=objects))
    try:
        with pytest.raises(kube.KubeError, match="applying Deployment selenium-hub: .*replicas"):
            grid.deploy(timeout=30)
    finally:
        grid.teardown(timeout=120)



def test_cleanup_deletes_the_grid_a_killed_run_left(cluster, tmp_path, monkeypatch):
    """`sfubench cloud-cleanup` (the nightly's always-run step) finds the run folder a killed
    runner left and deletes that run's namespace, through the kubeconfig as a user has it."""
    from sfubench.cloud import run as cloud_run
    kube.KubeGrid(cluster.api(), "sfubench-r20261123000000", kube.GridSpec(overlay="small")).deploy(timeout=120)
    (tmp_path / "r20261123000000-cloud-aws").mkdir()
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    assert cloud_run.cleanup(tmp_path) == []
    names = [n.metadata.name for n in k8s.CoreV1Api(cluster.api()).list_namespace().items]
    assert "sfubench-r20261123000000" not in names


def test_the_tag_sweep_deletes_the_namespaces_of_dead_runs_only(cluster):
    """`cloud-cleanup --tags` with a kubeconfig: the grid namespaces of runs whose deadline has
    passed and that are older than --older-than go; a live run's (older than that), a young one's,
    another owner's (no owner annotation) and a namespace that is no run's stay."""
    core = k8s.CoreV1Api(cluster.api())
    now = datetime.now(timezone.utc)

    def namespace(name: str, started_h: float, deadline_h: float | None, owner: str | None = "ci") -> None:
        tags = {sweep.RUN_TAG: f"r{now - timedelta(hours=started_h):%Y%m%d%H%M%S}"}
        if owner:
            tags[sweep.OWNER_TAG] = owner
        if deadline_h is not None:
            tags[sweep.DEADLINE_TAG] = f"{now - timedelta(hours=deadline_h):%Y-%m-%dT%H:%M:%SZ}"
        annotations = {k: v for k, v in sweep.namespace_annotations(tags).items() if v}
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(
            name=name, labels=sweep.namespace_labels(tags), annotations=annotations)))

    namespace("sfubench-expired", 10, 8)
    namespace("sfubench-before-deadlines", 30, None)   # judged by its start plus the longest --hours
    namespace("sfubench-live", 10, -1)
    namespace("sfubench-young", 1, 0.5)
    namespace("sfubench-others", 10, 8, owner=None)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="not-a-run")))
    ours = {"sfubench-expired", "sfubench-before-deadlines", "sfubench-live", "sfubench-young", "sfubench-others",
            "not-a-run"}
    try:
        said = []

        class Said:
            def say(self, line):
                said.append(line)
        assert sweep.Sweeper(None, sweep.duration_s("6h"), Said(), core=core).sweep() == []
        left = {n.metadata.name for n in core.list_namespace().items
                if n.status.phase != "Terminating" and n.metadata.name in ours}
        assert left == {"sfubench-live", "sfubench-young", "sfubench-others", "not-a-run"}, (left, said)
        assert sorted(line.split(" deleted")[0] for line in said) == [
            "sweep: namespace sfubench-before-deadlines", "sweep: namespace sfubench-expired"], said
    finally:
        for name in ours:
            try:
                core.delete_namespace(name)
            except ApiException:
                pass


def test_a_cloud_run_tears_everything_down_when_the_run_fails(cluster, tmp_path, monkeypatch):
    """The orchestration of `cloud-loadtest`: the grid really deployed on the control plane, the
    engine given Terraform's address and the grid's URL and scaling listener, and both torn down
    when the run fails. Terraform's hosts are a stand-in here (recording apply and destroy): no
    cloud API can be reached from the suite."""
    from sfubench import loadtest
    from sfubench.cloud import run as cloud_run
    from sfubench.cloud import terraform

    calls = []

    class Hosts:   # stand-in for the AWS API behind terraform.Hosts
        def __init__(self, cloud, variables, work):
            calls.append(("init", cloud.name, variables["run_id"], work.name))

        def apply(self):
            calls.append(("apply",))

        def outputs(self):
            return {"sfus": {"janus": {"address": "10.42.0.9"}}}

        def destroy(self):
            calls.append(("destroy",))

    seen = {}

    def failing_run(cfg, progress, site):
        names = [n.metadata.name for n in k8s.CoreV1Api(cluster.api()).list_namespace().items]
        (hub,) = k8s.CoreV1Api(cluster.api()).list_namespaced_pod(
            "sfubench-r1", label_selector="app.kubernetes.io/name=selenium-hub").items
        seen.update(sfu=site.sfu_address, node_cache=site.node_cache,
                    grid="the hub pod" if site.grid_url == f"http://{hub.status.pod_ip}:4444" else site.grid_url,
                    **{"answering is enough": site.grid_check is grid_mod.check_answering},
                    listeners=[streams for _, streams in site.listeners()], live="sfubench-r1" in names,
                    probes=[p.role for p in site.extra_probes],
                    generators=(site.generators_url, site.generator_addresses()))
        # the run's token: the site's is the one in the grid's Secret, which the pods read
        secret = k8s.CoreV1Api(cluster.api()).read_namespaced_secret("sfubench-run", "sfubench-r1")
        seen["token"] = base64.b64decode(secret.data["token"]).decode() == site.token and len(site.token) >= 32
        policy = k8s.NetworkingV1Api(cluster.api()).read_namespaced_network_policy("runner-only", "sfubench-r1")
        seen["admitted"] = policy.spec.ingress[1]._from[0].ip_block.cidr
        seen["reached"] = [p.ip_block.cidr for rule in policy.spec.egress for p in rule.to if p.ip_block]
        raise RuntimeError("the SFU stopped answering")

    class Courier(courier_mod.Courier):   # stand-in for the SSH delivery: no host at 10.42.0.9 here
        def deliver(self, address, timeout=900, say=None):
            calls.append(("deliver", address))

    monkeypatch.setattr(terraform, "Hosts", Hosts)
    monkeypatch.setattr(loadtest, "run", failing_run)
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    cfg = _cfg(out=str(tmp_path), page_address="10.42.0.5")
    courier = Courier(Adapter.load("janus"), secrets.token_urlsafe(24))
    try:
        with pytest.raises(RuntimeError, match="stopped answering"):
            cloud_run._apply_and_run(cloud_run.cloud("aws"), cfg, {"run_id": "r1", "vpc_cidr": "10.42.0.0/16",
                                                                   "git_ref": "b940d9a"}, "r1", _Quiet(), courier)
    finally:
        courier.close()
    assert calls == [("init", "aws", "r1", "r1-cloud-aws"), ("apply",), ("deliver", "10.42.0.9"), ("destroy",)]
    assert seen == {"sfu": "10.42.0.9", "grid": "the hub pod", "answering is enough": True, "node_cache": "/media",
                    "listeners": [["events"]], "live": True, "probes": ["clients"],
                    "generators": ("http://synth:9480/command", []), "token": True, "admitted": "10.42.0.0/16",
                    "reached": ["10.42.0.0/16", "10.42.0.9/32"]}
    names = [n.metadata.name for n in k8s.CoreV1Api(cluster.api()).list_namespace().items]
    assert "sfubench-r1" not in names


@full
def test_nodes_that_join_late_and_a_node_lost_mid_run(cluster):
    """A cloud's autoscaler adds machines minutes after pods ask for them, and may lose one: the
    room's scaling waits for the late machine (its pods Pending, then Running there); once a node
    is lost, the clients' probe reads only the pods still there, and the next room's scaling waits
    for the nodes the rooms need again, or says in one line why they did not come."""
    api = cluster.api()
    core = k8s.CoreV1Api(api)
    grid = kube.KubeGrid(api, "sfubench-t3", kube.GridSpec(overlay="small", token=RUN_TOKEN))
    handler, _ = grid.listener(_cfg(), timeout=150)

    def room(n, on=handler):
        on("events", {"event": "room_started", "room": n})

    try:
        grid.deploy(timeout=120)
        room(1)
        room(2)   # 5 nodes: the two machines are full
        # room 3 needs 8: its scaling waits until a machine joins late
        done = {}
        waiting = threading.Thread(target=lambda: done.update(room3=_raised(room, 3)))
        waiting.start()
        time.sleep(5)
        assert waiting.is_alive(), done
        cluster.add_node("fake-late", cpu="2", memory="4Gi")
        waiting.join(160)
        assert done == {"room3": None} and _ready_pods(core, "sfubench-t3", "chrome-node") == 8
        pods = core.list_namespaced_pod("sfubench-t3", label_selector="app.kubernetes.io/name=chrome-node").items
        lost = sum(p.spec.node_name == "fake-late" for p in pods)
        assert lost == 3

        # The machine is gone, and its pods with it: deleted here as the pod garbage collector
        # would delete them, which waits 40 s (hard-coded) before it takes a pod's node for gone.
        core.delete_node("fake-late")
        for p in pods:
            if p.spec.node_name == "fake-late":
                core.delete_namespaced_pod(p.metadata.name, "sfubench-t3", grace_period_seconds=0)
        deadline = time.monotonic() + 120
        while len(grid.addresses("chrome-node")) > 8 - lost and time.monotonic() < deadline:
            time.sleep(1)
        assert len(grid.addresses("chrome-node")) == 8 - lost
        # the rooms need no more nodes than before, but the lost ones are waited for again: no
        # machine comes here, and the reason is one line
        short, _ = grid.listener(_cfg(), timeout=10)
        with pytest.raises(kube.KubeError, match=r"^timed out after 10 s waiting for 8 Chrome node\(s\) to be ready "
                                                 r"\(pods: [^\n]*Unschedulable"):
            room(3, on=short)
    finally:
        grid.teardown(timeout=120)
        try:
            core.delete_node("fake-late")
        except ApiException:
            pass


def _raised(fn, *args):
    try:
        fn(*args)
    except Exception as e:   # reported to the test's thread
        return e
    return None


NODE_GRACE_S = 50   # the node-lifecycle controller's grace period before it takes a silent node for dead


def test_no_node_was_taken_for_dead_while_the_module_ran(cluster):
    """Last of the module, once the first fake node has outlived the node-lifecycle controller's
    grace period (waited out here if the module ran shorter, with a monitor period to spare): no
    node and no pod was ever marked not ready by it (its NodeNotReady events), so every readiness
    the tests above waited for was the provisioner's and the scheduler's doing."""
    core = k8s.CoreV1Api(cluster.api())
    age = datetime.now(timezone.utc) - core.read_node("fake-0").metadata.creation_timestamp
    time.sleep(max(0.0, NODE_GRACE_S + 10 - age.total_seconds()))
    events = core.list_event_for_all_namespaces(field_selector="reason=NodeNotReady").items
    assert not events, [f"{e.involved_object.kind} {e.involved_object.name}: {e.message}" for e in events]


class _Quiet:
    def say(self, message, transient=False):
        pass
