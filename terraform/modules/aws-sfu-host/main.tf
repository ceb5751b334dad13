# The AWS half of an SFU host: everything it decides comes from the provider-free sfu-plan module.
resource "aws_security_group" "sfu" {
  name        = var.host.name
  description = "sfubench SFU host: signalling and media from the clients, SSH from the operator"
  vpc_id      = var.vpc_id
  tags        = var.host.tags
}

resource "aws_vpc_security_group_ingress_rule" "sfu" {
  for_each          = { for r in var.host.ingress : "${r.protocol}-${r.from}-${r.to}-${r.cidr}" => r }
  security_group_id = aws_security_group.sfu.id
  ip_protocol       = each.value.protocol
  from_port         = each.value.from
  to_port           = each.value.to
  cidr_ipv4         = each.value.cidr
  description       = each.value.why
  tags              = var.host.tags
}

# Egress stays open: cloud-init installs from Debian's mirrors and the registries.
resource "aws_vpc_security_group_egress_rule" "all" {
  security_group_id = aws_security_group.sfu.id
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
  description       = "package installs"
  tags              = var.host.tags
}

resource "aws_instance" "sfu" {
  ami                         = var.ami
  instance_type               = var.instance_type
  subnet_id                   = var.subnet_id
  vpc_security_group_ids      = [aws_security_group.sfu.id]
  key_name                    = var.key_name
  user_data                   = var.host.user_data
  user_data_replace_on_change = true
  associate_public_ip_address = true
  # cloud-init's deadline powers the host off: that terminates it, so nothing is billed after
  instance_initiated_shutdown_behavior = "terminate"

  root_block_device {
    volume_size = var.disk_gb
    volume_type = "gp3"
    tags        = var.host.tags
  }

  metadata_options {
    http_tokens = "required"
  }

  tags = var.host.tags
}
