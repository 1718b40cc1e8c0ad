package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at link time, e.g.
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD) -X main.buildTime=$(date -u +%FT%TZ)"
//
// Each is empty unless set; the build info fills the gaps (see readBuild).
var (
	// version is mcpgate's release version. When empty, the main module's
	// version from the build info is used (`go install module@version`
	// records the tag; a build in a git checkout, a pseudo-version).
	version = ""
	// commit is the VCS revision. When empty, vcs.revision from the build
	// info is used: set it where the source has no .git, as in a
	// container build whose context leaves it out.
	commit = ""
	// buildTime is when the binary was built (RFC 3339). The build info
	// records only the commit's time, so there is no fallback.
	buildTime = ""
)

// build is what `mcpgate version` reports. Empty fields are unknown.
type build struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"` // vcs.time
	Modified   bool   `json:"modified"`             // vcs.modified: uncommitted changes were built
	BuildTime  string `json:"buildTime,omitempty"`
	Go         string `json:"go"`
	Platform   string `json:"platform"` // GOOS/GOARCH
}

// readBuild returns the link-time values, completed from the build info
// the go command stamps: the module version, and vcs.revision, vcs.time
// and vcs.modified when it built from a VCS checkout (test binaries and
// -buildvcs=false builds have none).
func readBuild() build {
	b := build{
		Version:   version,
		Commit:    commit,
		BuildTime: buildTime,
		Go:        runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if b.Version == "" {
			b.Version = "dev"
		}
		return b
	}
	if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.Version = bi.Main.Version
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	// A commit given at link time names another tree than the one the
	// go command saw (if any): its time and dirty flag would not match.
	if b.Commit != "" {
		return b
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// versionString returns version, else the module version recorded in the
// build info, else "dev". serve hands it to the gateway, which sends it to
// servers as clientInfo.version.
func versionString() string {
	return readBuild().Version
}

// writeText prints b for people: the version, the Go version and
// platform, then whichever of commit and build time are known.
func (b build) writeText(w io.Writer) {
	fmt.Fprintf(w, "mcpgate %s\n%s %s\n", b.Version, b.Go, b.Platform)
	if b.Commit != "" {
		dirty := ""
		if b.Modified {
			dirty = " (modified)"
		}
		fmt.Fprintf(w, "commit %s%s\n", b.Commit, dirty)
	}
	if b.CommitTime != "" {
		fmt.Fprintf(w, "committed %s\n", b.CommitTime)
	}
	if b.BuildTime != "" {
		fmt.Fprintf(w, "built %s\n", b.BuildTime)
	}
}

// writeJSON prints b as one indented JSON object.
func (b build) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(b)
}
