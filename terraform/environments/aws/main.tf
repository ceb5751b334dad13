# One VPC, one public subnet, and one identical host per SFU, as the CoSMo study ran them.
# client_cidr is the VPC's block: the grid's nodes and the runner reach the SFUs from inside it.
module "plan" {
  source        = "../../modules/sfu-plan"
  run_id        = var.run_id
  owner         = var.owner
  sfus          = var.sfus
  instance_type = var.instance_type
  client_cidr   = var.vpc_cidr
  operator_cidr = var.operator_cidr
  repo_url      = var.repo_url
  git_ref       = var.git_ref
  page_origin   = var.page_origin
  sfu_profile   = var.sfu_profile

  probe_port         = var.probe_port
  secrets_public_key = var.secrets_public_key
  hourly_prices      = var.hourly_prices != null ? var.hourly_prices : jsondecode(file("${path.module}/prices.json")).prices
  hours              = var.hours
  deadline           = var.deadline
}

data "aws_availability_zones" "up" {
  state = "available"
}

# Debian 12, the system the local lab and the install scripts are written for.
data "aws_ami" "debian" {
  most_recent = true
  owners      = ["136693071363"]
  filter {
    name   = "name"
    values = ["debian-12-amd64-*"]
  }
}

# A VPC of the run's own unless the caller gives a subnet (where its cluster and runner already live).
resource "aws_vpc" "run" {
  count                = var.subnet_id == null ? 1 : 0
  cidr_block           = var.vpc_cidr
  enable_dns_hostnames = true
  tags                 = { Name = "sfubench-${var.run_id}" }
}

resource "aws_internet_gateway" "run" {
  count  = var.subnet_id == null ? 1 : 0
  vpc_id = aws_vpc.run[0].id
}

resource "aws_subnet" "run" {
  count             = var.subnet_id == null ? 1 : 0
  vpc_id            = aws_vpc.run[0].id
  cidr_block        = cidrsubnet(var.vpc_cidr, 8, 0)
  availability_zone = data.aws_availability_zones.up.names[0]
  tags              = { Name = "sfubench-${var.run_id}" }
}

resource "aws_route_table" "run" {
  count  = var.subnet_id == null ? 1 : 0
  vpc_id = aws_vpc.run[0].id
  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.run[0].id
  }
}

resource "aws_route_table_association" "run" {
  count          = var.subnet_id == null ? 1 : 0
  subnet_id      = aws_subnet.run[0].id
  route_table_id = aws_route_table.run[0].id
}

data "aws_subnet" "given" {
  count = var.subnet_id == null ? 0 : 1
  id    = var.subnet_id
}

locals {
  subnet_id = var.subnet_id == null ? aws_subnet.run[0].id : var.subnet_id
  vpc_id    = var.subnet_id == null ? aws_vpc.run[0].id : data.aws_subnet.given[0].vpc_id
}

module "sfu_host" {
  source        = "../../modules/aws-sfu-host"
  for_each      = module.plan.hosts
  host          = each.value
  instance_type = var.instance_type
  disk_gb       = var.disk_gb
  ami           = data.aws_ami.debian.id
  subnet_id     = local.subnet_id
  vpc_id        = local.vpc_id
  key_name      = var.key_name
}
