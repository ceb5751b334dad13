"""The tag sweeper (`sfubench cloud-cleanup --tags --older-than`) with real boto3 calls against
moto's server: a stand-in for AWS's API, which no test here can reach. Runs' resources are made as
Terraform makes them (a VPC, its subnet, route table and internet gateway, a security group and an
instance, each tagged with the run, its owner and its deadline); the sweep deletes those of runs
whose deadline has passed and leaves live ones, whatever their age, and what is not the project's."""
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest

from support.awsapi import moto_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def aws():
    with moto_server() as env:
        yield env


def make_run(ec2, started: datetime, hours: float | None = 2, owner: str | None = "ci") -> dict:
    """What Terraform's AWS environment makes for one run, with its default tags: `hours` None makes
    a run from before the deadline tag, `owner` None one that is not this project's."""
    tags = [{"Key": "sfubench:run", "Value": f"r{started:%Y%m%d%H%M%S}"}]
    if owner:
        tags.append({"Key": "sfubench:owner", "Value": owner})
    if hours is not None:
        tags.append({"Key": "sfubench:deadline", "Value": f"{started + timedelta(hours=hours):%Y-%m-%dT%H:%M:%SZ}"})

    def spec(kind):
        return [{"ResourceType": kind, "Tags": tags}]
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16", TagSpecifications=spec("vpc"))["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.0.0/24", TagSpecifications=spec("subnet"))["Subnet"]["SubnetId"]
    gw = ec2.create_internet_gateway(TagSpecifications=spec("internet-gateway"))["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gw, VpcId=vpc)
    table = ec2.create_route_table(VpcId=vpc, TagSpecifications=spec("route-table"))["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=gw)
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)
    group = ec2.create_security_group(GroupName=f"sfubench-{tags[0]['Value']}-janus", Description="sfu", VpcId=vpc,
                                      TagSpecifications=spec("security-group"))["GroupId"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    instance = ec2.run_instances(ImageId=image, InstanceType="c5.xlarge", MinCount=1, MaxCount=1, SubnetId=subnet,
                                 SecurityGroupIds=[group], TagSpecifications=spec("instance"))["Instances"][0]["InstanceId"]
    return {"vpc": vpc, "group": group, "instance": instance, "gateway": gw}


def state(ec2, run: dict) -> dict:
    instance = ec2.describe_instances(InstanceIds=[run["instance"]])["Reservations"][0]["Instances"][0]
    return {"instance": instance["State"]["Name"],
            "vpc": bool(ec2.describe_vpcs(Filters=[{"Name": "vpc-id", "Values": [run["vpc"]]}])["Vpcs"]),
            "group": bool(ec2.describe_security_groups(
                Filters=[{"Name": "group-id", "Values": [run["group"]]}])["SecurityGroups"]),
            "gateway": bool(ec2.describe_internet_gateways(
                Filters=[{"Name": "internet-gateway-id", "Values": [run["gateway"]]}])["InternetGateways"])}


def cleanup(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sfubench.cli", "cloud-cleanup", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, env={**os.environ, **env})


def test_the_sweep_deletes_runs_past_their_deadline_and_leaves_live_ones(aws, monkeypatch):
    for k, v in aws.items():
        monkeypatch.setenv(k, v)
    ec2 = boto3.client("ec2")
    now = datetime.now(timezone.utc)
    ended = make_run(ec2, now - timedelta(hours=7), hours=2)            # ended 5 h ago
    live = make_run(ec2, now - timedelta(hours=7), hours=10)            # 7 h old, 3 h to go
    young = make_run(ec2, now - timedelta(hours=1), hours=0.5)          # ended, but younger than 6 h
    legacy = make_run(ec2, now - timedelta(hours=7), hours=None)        # no deadline: start + 24 h
    old_legacy = make_run(ec2, now - timedelta(hours=25), hours=None)
    foreign = make_run(ec2, now - timedelta(hours=30), hours=1, owner=None)   # not this project's
    r = cleanup(aws, "--tags", "--older-than", "6h")
    assert r.returncode == 0, r.stdout + r.stderr
    gone = {"instance": "terminated", "vpc": False, "group": False, "gateway": False}
    kept = {"instance": "running", "vpc": True, "group": True, "gateway": True}
    assert state(ec2, ended) == gone and state(ec2, old_legacy) == gone
    for run in (live, young, legacy, foreign):
        assert state(ec2, run) == kept, run
    assert f"sweep: VPC {ended['vpc']} deleted" in r.stdout and live["vpc"] not in r.stdout
    # a second sweep finds nothing more to do; a shorter age takes the young run that ended too
    assert cleanup(aws, "--tags", "--older-than", "6h").stdout == ""
    r = cleanup(aws, "--tags", "--older-than", "30m")
    assert r.returncode == 0 and state(ec2, young) == gone and state(ec2, live) == kept, r.stdout + r.stderr


def test_what_is_not_the_runs_own_inside_its_vpc_is_left_and_said(aws, monkeypatch):
    for k, v in aws.items():
        monkeypatch.setenv(k, v)
    ec2 = boto3.client("ec2")
    run = make_run(ec2, datetime.now(timezone.utc) - timedelta(hours=9), hours=2)
    theirs = ec2.create_subnet(VpcId=run["vpc"], CidrBlock="10.42.9.0/24")["Subnet"]["SubnetId"]   # untagged
    r = cleanup(aws, "--tags", "--older-than", "6h")
    assert state(ec2, run)["instance"] == "terminated" and state(ec2, run)["vpc"], r.stdout
    assert ec2.describe_subnets(SubnetIds=[theirs])["Subnets"] and theirs not in r.stdout
    assert f"VPC {run['vpc']} NOT deleted" in r.stdout and r.returncode == 1, r.stdout + r.stderr
    ec2.delete_subnet(SubnetId=theirs)


def test_the_sweep_says_what_it_needs(aws):
    r = cleanup(aws, "--help")
    assert "--tags" in r.stdout and "--older-than" in r.stdout
    r = cleanup(aws, "--tags", "--older-than", "soon")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "wants a duration such as 6h" in r.stderr, r.stderr
