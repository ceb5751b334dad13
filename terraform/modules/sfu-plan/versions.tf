terraform {
  # 1.8: the oldest release `terraform test` with mock-free run blocks works on, and the newest the
  # Go module proxy builds (scripts/tools.sh).
  required_version = ">= 1.8.0"
}
