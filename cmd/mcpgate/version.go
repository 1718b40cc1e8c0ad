package main

import "runtime/debug"

// version is mcpgate's release version, set at build time with
// -ldflags "-X main.version=v1.2.3". When empty, versionString falls back
// to the main module's version from the build info.
var version = ""

// versionString returns version, else the module version recorded by
// `go install module@version`, else "dev". serve hands it to the gateway,
// which sends it to servers as clientInfo.version.
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
