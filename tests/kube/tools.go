//go:build tools

// The control plane the cloud provisioner's tests run against, pinned here so that the Go module
// proxy can build it: k8s.io/kubernetes resolves its staging modules only through these replaces.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
