terraform {
  required_version = ">= 1.8.0"
  # the run's state beside its results (`-backend-config=path=...`); a shared team may use S3 instead
  backend "local" {}
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.80"
    }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = module.plan.common_tags
  }
}
