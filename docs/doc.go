// Package docs holds no code: its tests check the documentation (README.md
// and docs/*.md) against the repository and the gateway it describes.
//
//   - links_test.go: every relative link resolves to a file, and its anchor
//     to a heading; every repository path shown in code exists.
//   - config_test.go: every ```json block is a config that the gateway's own
//     loader accepts (a block marked ```json fragment only has to name real
//     keys); every key in a "key of `PATH`" table exists at PATH, and every
//     key of examples/full.json is in its table, with the default it shows.
//   - make_test.go: every `make TARGET` shown is a target of the Makefile.
//
// The flags a doc shows (`mcpgate serve --config FILE`) are checked against
// the binary's own flag sets by cmd/mcpgate's cli_docs_test.go, which can
// call them. Both read the Markdown with internal/testkit/markdown.
package docs
