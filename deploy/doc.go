// Package deploy holds no code: its tests check the packaging under this
// directory against the gateway it packages.
//
//   - docker/: Dockerfile (distroless) and Dockerfile.node (npx servers)
//   - compose/: mcpgate behind Traefik with subdomain routing
//   - systemd/: a hardened unit
//   - helm/mcpgate/: a chart
//
// The tests use no external tool (docker, helm, systemd) unless it is
// installed: each file is parsed, the config files it ships are loaded with
// the gateway's own config loader, the Helm templates are rendered with a
// minimal Helm-compatible function set, and the probe paths every package
// uses are requested from a running gateway.
package deploy
