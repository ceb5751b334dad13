variable "run_id" {
  description = "Identifies one benchmark run; part of every name and tag, so a leaked resource can be traced to its run."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,30}$", var.run_id))
    error_message = "run_id must be 1-31 characters of a-z, 0-9 and '-', starting with a letter or digit."
  }
}

variable "owner" {
  description = "Who started the run (a person or the nightly workflow); tagged on everything."
  type        = string
  validation {
    condition     = length(trimspace(var.owner)) > 0
    error_message = "owner must not be empty: it is how a leaked resource finds its way home."
  }
}

variable "sfus" {
  description = "The SFUs under test, by adapter name, as the runner reads them from sfu-configs/<name>/sfu.toml: version, TCP ports, UDP port ranges, and the toolchains its install needs on a bare host (steps of scripts/deps.sh)."
  type = map(object({
    version    = string
    tcp_ports  = list(number)
    udp_ranges = list(object({ from = number, to = number }))
    toolchains = optional(list(string), [])
  }))
  validation {
    condition     = length(var.sfus) > 0
    error_message = "sfus must name at least one SFU."
  }
  validation {
    condition     = alltrue([for name, _ in var.sfus : can(regex("^[a-z][a-z0-9]{1,15}$", name))])
    error_message = "SFU names must be 2-16 characters of a-z and 0-9, starting with a letter (they become host names)."
  }
  validation {
    condition = alltrue(flatten([for _, s in var.sfus : concat(
      [for p in s.tcp_ports : p >= 1 && p <= 65535],
      [for r in s.udp_ranges : r.from >= 1 && r.from <= r.to && r.to <= 65535],
    )]))
    error_message = "ports must lie in 1-65535 and every UDP range must have from <= to."
  }
}

variable "instance_type" {
  description = "The one instance type every SFU host gets: identical hosts are the point of the comparison."
  type        = string
  default     = "c5.2xlarge"
}

variable "client_cidr" {
  description = "The network the browsers (the grid's nodes) and the runner connect from; the only source of signalling and media traffic."
  type        = string
  validation {
    condition     = can(cidrhost(var.client_cidr, 0)) && try(tonumber(split("/", var.client_cidr)[1]) >= 8, false)
    error_message = "client_cidr must be a CIDR block such as 10.42.0.0/16, no wider than /8."
  }
}

variable "operator_cidr" {
  description = "Where SSH may come from (an operator's address as a /32); no other SSH is allowed."
  type        = string
  validation {
    condition     = can(cidrhost(var.operator_cidr, 0)) && try(tonumber(split("/", var.operator_cidr)[1]) >= 8, false)
    error_message = "operator_cidr must be a CIDR block no wider than /8 (your own address as a /32)."
  }
}

variable "repo_url" {
  description = "The sfubench repository the hosts clone to install and start their SFU."
  type        = string
  default     = "https://github.com/sfubench/sfubench.git"
}

variable "git_ref" {
  description = "The commit the hosts check out: the runner's own, so both sides run the same adapters."
  type        = string
  validation {
    condition     = can(regex("^[0-9a-f]{7,40}$", var.git_ref))
    error_message = "git_ref must be a commit hash (7-40 hex digits), not a branch that may move during the run."
  }
}

variable "page_origin" {
  description = "The host the run's pages are served from (the runner's --page-address): an SFU that checks the origin of its signalling lets them in."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^[A-Za-z0-9.:-]*$", var.page_origin))
    error_message = "page_origin must be a host name or address."
  }
}

variable "probe_port" {
  description = "The TCP port where each host's `sfubench serve` answers the runner's probe of its SFU (CPU, memory, UDP counters); the runner gives its own."
  type        = number
  validation {
    condition     = var.probe_port >= 1 && var.probe_port <= 65535
    error_message = "probe_port must lie in 1-65535."
  }
}

variable "secrets_public_key" {
  description = "The public half of the run's SSH key: on every SFU host it may only write the secrets file (a forced command) that holds the run's token, which the host's probe answers to, and the SFU's secrets if it has any. Neither passes through Terraform."
  type        = string
  validation {
    condition     = can(regex("^ssh-ed25519 [A-Za-z0-9+/=]+( [A-Za-z0-9@._ -]*)?$", var.secrets_public_key))
    error_message = "secrets_public_key must be one ssh-ed25519 public key line: every host takes the run's token over SSH."
  }
}

variable "sfu_profile" {
  description = "The adapters' profile every host starts: auto (an adapter's tuned one where it has one, else defaults), defaults or tuned."
  type        = string
  default     = "auto"
  validation {
    condition     = contains(["auto", "defaults", "tuned"], var.sfu_profile)
    error_message = "sfu_profile must be auto, defaults or tuned."
  }
}

variable "hourly_prices" {
  description = "On-demand price per hour (USD) by instance type, for the estimate printed before apply."
  type        = map(number)
  default     = {}
}

variable "hours" {
  description = "How long the hosts are expected to live, for the cost estimate."
  type        = number
  default     = 2
  validation {
    condition     = var.hours > 0
    error_message = "hours must be positive."
  }
}

variable "deadline" {
  description = "When the run ends, UTC (RFC 3339): its start and its hours. Tagged on what it makes; empty: not tagged."
  type        = string
  default     = ""
  validation {
    condition     = var.deadline == "" || can(formatdate("YYYY", var.deadline))
    error_message = "deadline must be an RFC 3339 time such as 2026-12-05T22:00:00Z, or empty."
  }
}
