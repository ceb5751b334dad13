//go:build tools

// etcd for the test control plane: 3.6, whose watch progress requests kube-apiserver's streaming
// lists need (Debian's 3.4 answers them with errors, and clients then react tens of seconds late).
package etcd

import _ "go.etcd.io/etcd/server/v3"
