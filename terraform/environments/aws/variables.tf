variable "region" {
  description = "The AWS region of the whole run (the study's VMs shared one region and VPC)."
  type        = string
  default     = "us-east-1"
}

variable "run_id" {
  description = "Identifies the run; in every name and tag."
  type        = string
}

variable "owner" {
  description = "Who started the run; tagged on everything."
  type        = string
}

variable "sfus" {
  description = "The SFUs under test with their ports (written by the runner from sfu-configs/)."
  type = map(object({
    version    = string
    tcp_ports  = list(number)
    udp_ranges = list(object({ from = number, to = number }))
    secrets    = optional(bool, false)
    toolchains = optional(list(string), [])
  }))
}

variable "instance_type" {
  description = "One instance type for every SFU host."
  type        = string
  default     = "c5.2xlarge"
}

variable "disk_gb" {
  description = "Root disk of each SFU host, GB (builds of mediasoup and Medooze need room)."
  type        = number
  default     = 30
  validation {
    condition     = var.disk_gb >= 20 && var.disk_gb <= 500
    error_message = "disk_gb must be between 20 and 500."
  }
}

variable "vpc_cidr" {
  description = "The block the SFUs accept clients from: the run's VPC, or the given subnet's VPC's block."
  type        = string
  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0))
    error_message = "vpc_cidr must be a CIDR block."
  }
}

variable "subnet_id" {
  description = "An existing subnet to put the SFU hosts in (where the Kubernetes cluster's nodes and the runner are); null creates a VPC of vpc_cidr for the run."
  type        = string
  default     = null
}

variable "operator_cidr" {
  description = "Where SSH to the SFU hosts may come from (a /32)."
  type        = string
}

variable "probe_port" {
  description = "The port of each host's probe of its SFU, which the runner reads (see modules/sfu-plan)."
  type        = number
}

variable "secrets_public_key" {
  description = "The public half of the run's SSH key, which may only deliver the run's token and the SFUs' secrets (see modules/sfu-plan)."
  type        = string
}

variable "key_name" {
  description = "An existing EC2 key pair for SSH, or null."
  type        = string
  default     = null
}

variable "git_ref" {
  description = "The commit every host checks out (the runner's)."
  type        = string
}

variable "page_origin" {
  description = "The host the run's pages are served from (the runner's --page-address)."
  type        = string
  default     = ""
}

variable "repo_url" {
  description = "The sfubench repository the hosts clone."
  type        = string
  default     = "https://github.com/sfubench/sfubench.git"
}

variable "sfu_profile" {
  description = "auto (each adapter's tuned profile where it has one, else defaults), defaults or tuned, on every host."
  type        = string
  default     = "auto"
}

variable "hours" {
  description = "Expected lifetime of the hosts, for the cost estimate."
  type        = number
  default     = 2
}

variable "deadline" {
  description = "When the run ends, UTC (RFC 3339), tagged on everything it makes; empty: not tagged."
  type        = string
  default     = ""
}

variable "hourly_prices" {
  description = "On-demand price per hour (USD) by instance type; null: prices.json, the list `make cloud-loadtest --dry-run` estimates with too."
  type        = map(number)
  default     = null
}
