"""The tag sweeper: what lost runs left in AWS, found by the tags every resource of a run carries
(`sfubench:run`, whose value, the run's id, says when it started; `sfubench:owner`; and
`sfubench:deadline`, when it ends) rather than by Terraform state, which lives in a run folder that
a dead runner's next checkout wipes. `sfubench cloud-cleanup --tags --older-than 6h` deletes the runs
whose deadline has passed and that are older than that: a live run is never taken, whatever its
age. A run made before the deadline tag existed is judged by its start plus MAX_HOURS, the longest
a run may ask for. Only what carries this project's tags is touched: a resource without the owner
tag, or one inside a run's VPC without that run's tag, is left (and the VPC with it, said).
Deleted in the order AWS allows: instances (waited until terminated), their security groups, then
each run VPC's subnets, route tables and internet gateway, then the VPC. Where a kubeconfig is
found, the grid namespaces of such runs go too: a namespace carries the run's id as a label and
its owner and deadline as annotations (label values cannot hold a time)."""
from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

from ..config import ConfigError
from ..progress import Progress

RUN_TAG = "sfubench:run"
OWNER_TAG = "sfubench:owner"
DEADLINE_TAG = "sfubench:deadline"
NS_RUN = "sfubench/run"                                      # a grid namespace's label ...
NS_OWNER, NS_DEADLINE = "sfubench/owner", "sfubench/deadline"   # ... and annotations
MAX_HOURS = 24   # the longest --hours a run may ask (cloud-loadtest refuses more)
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> float:
    """'6h', '90m', '2d', '45s' in seconds (ConfigError otherwise)."""
    m = DURATION.fullmatch(text.strip())
    if not m:
        raise ConfigError(f"--older-than wants a duration such as 6h, 90m or 2d, got {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def run_started(run_id: str) -> datetime | None:
    """When a run began, from its id (r<UTC %Y%m%d%H%M%S>); None for a tag that is not a run id."""
    try:
        return datetime.strptime(run_id, "r%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _deadline(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _tags(resource: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def namespace_labels(tags: dict[str, str]) -> dict[str, str]:
    """A run's tags (RUN_TAG, OWNER_TAG, DEADLINE_TAG) as its grid namespace's labels ..."""
    return {NS_RUN: tags[RUN_TAG]}


def namespace_annotations(tags: dict[str, str]) -> dict[str, str]:
    """... and annotations."""
    return {NS_OWNER: tags.get(OWNER_TAG, ""), NS_DEADLINE: tags.get(DEADLINE_TAG, "")}


def _namespace_tags(metadata) -> dict[str, str]:
    """A namespace's (a kubernetes V1ObjectMeta) as the run's tags; an owner annotation left empty
    counts as none."""
    labels, notes = metadata.labels or {}, metadata.annotations or {}
    tags = {RUN_TAG: labels.get(NS_RUN, ""), DEADLINE_TAG: notes.get(NS_DEADLINE, "")}
    if notes.get(NS_OWNER):
        tags[OWNER_TAG] = notes[NS_OWNER]
    return tags


def _tagged(ec2, kind: str, key: str) -> list[dict]:
    """Every resource of `kind` (describe_<kind>, whose pages list them under `key`) carrying the run tag."""
    pages = ec2.get_paginator(f"describe_{kind}").paginate(Filters=[{"Name": "tag-key", "Values": [RUN_TAG]}])
    return [r for page in pages for r in page[key]]


class Sweeper:
    """`ec2`: a boto3 EC2 client (the region's); `core`: a kubernetes CoreV1Api; either None where
    there is none to sweep. `now`: the clock the age is judged by."""

    def __init__(self, ec2, older_than_s: float, progress: Progress | None = None, now=None, core=None):
        self.ec2, self.core, self.older_than_s = ec2, core, older_than_s
        self.progress = progress or Progress()
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.failed: list[str] = []

    def stale(self, resource: dict) -> str | None:
        return self.stale_run(_tags(resource))

    def stale_run(self, tags: dict[str, str]) -> str | None:
        """The run id when `tags` are this project's (its run and owner tags), that run's deadline
        has passed and it is older than the limit; else None."""
        run_id = tags.get(RUN_TAG, "")
        started = run_started(run_id)
        if started is None or OWNER_TAG not in tags:
            return None
        ends = _deadline(tags.get(DEADLINE_TAG, "")) or started + timedelta(hours=MAX_HOURS)
        now = self.now()
        if now < ends or (now - started).total_seconds() < self.older_than_s:
            return None
        return run_id

    def sweep(self) -> list[str]:
        """Deletes every stale run's resources; returns what could not be deleted, one line each."""
        if self.ec2 is not None:
            self._aws()
        if self.core is not None:
            self._namespaces()
        return self.failed

    def _aws(self) -> None:
        instances = [i for r in _tagged(self.ec2, "instances", "Reservations") for i in r["Instances"]
                     if i["State"]["Name"] not in ("terminated", "shutting-down") and self.stale(i)]
        if instances:
            ids = [i["InstanceId"] for i in instances]
            self._attempt(f"instances {' '.join(ids)}", self.ec2.terminate_instances, InstanceIds=ids)
            self._attempt("waiting for them to terminate",
                          lambda: self.ec2.get_waiter("instance_terminated").wait(
                              InstanceIds=ids, WaiterConfig={"Delay": 5, "MaxAttempts": 120}))
        for group in _tagged(self.ec2, "security_groups", "SecurityGroups"):
            if self.stale(group):
                self._attempt(f"security group {group['GroupId']}", self.ec2.delete_security_group,
                              GroupId=group["GroupId"])
        for vpc in _tagged(self.ec2, "vpcs", "Vpcs"):
            if run_id := self.stale(vpc):
                self._vpc(vpc["VpcId"], run_id)

    def _namespaces(self) -> None:
        """The grid namespaces of stale runs (not waited for: the cluster deletes what is in them)."""
        for ns in self.core.list_namespace(label_selector=NS_RUN).items:
            if ns.status.phase != "Terminating" and self.stale_run(_namespace_tags(ns.metadata)):
                self._attempt(f"namespace {ns.metadata.name}", self.core.delete_namespace, name=ns.metadata.name)

    def _vpc(self, vpc_id: str, run_id: str) -> None:
        """A run's own VPC and what Terraform made in it (what carries the run's tag)."""
        in_vpc = [{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": f"tag:{RUN_TAG}", "Values": [run_id]}]
        for subnet in self.ec2.describe_subnets(Filters=in_vpc)["Subnets"]:
            self._attempt(f"subnet {subnet['SubnetId']}", self.ec2.delete_subnet, SubnetId=subnet["SubnetId"])
        for table in self.ec2.describe_route_tables(Filters=in_vpc)["RouteTables"]:
            if any(a.get("Main") for a in table.get("Associations", [])):
                continue   # goes with the VPC
            for a in table.get("Associations", []):
                self._attempt(f"route table association {a['RouteTableAssociationId']}",
                              self.ec2.disassociate_route_table, AssociationId=a["RouteTableAssociationId"])
            self._attempt(f"route table {table['RouteTableId']}", self.ec2.delete_route_table,
                          RouteTableId=table["RouteTableId"])
        gateways = self.ec2.describe_internet_gateways(
            Filters=[{"Name": "attachment.vpc-id", "Values": [vpc_id]}, in_vpc[1]])["InternetGateways"]
        for gw in gateways:
            gid = gw["InternetGatewayId"]
            self._attempt(f"internet gateway {gid}", self.ec2.detach_internet_gateway, InternetGatewayId=gid, VpcId=vpc_id)
            self._attempt(f"internet gateway {gid}", self.ec2.delete_internet_gateway, InternetGatewayId=gid)
        self._attempt(f"VPC {vpc_id}", self.ec2.delete_vpc, VpcId=vpc_id)

    def _attempt(self, what: str, call, **kwargs) -> None:
        started = time.monotonic()
        try:
            call(**kwargs)
        except Exception as e:   # botocore's errors: the rest is still tried, and this one said
            self.failed.append(f"{what}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")
            self.progress.say(f"sweep: {what} NOT deleted: {self.failed[-1]}")
            return
        self.progress.say(f"sweep: {what} deleted ({time.monotonic() - started:.1f} s)")


def sweep(older_than: str, progress: Progress | None = None, core=None) -> list[str]:
    """The region's stale runs deleted through boto3 (credentials, region and endpoint as the AWS
    CLI reads them: AWS_DEFAULT_REGION, AWS_ENDPOINT_URL...), and with `core` (a CoreV1Api) their
    grid namespaces; returns what failed."""
    import boto3
    return Sweeper(boto3.client("ec2"), duration_s(older_than), progress, core=core).sweep()
