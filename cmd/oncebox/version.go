package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// buildVersion is what `oncebox version` reports.
type buildVersion struct {
	// Version is the module version the binary was built from: v1.2.3
	// with go install …@v1.2.3, "(devel)" when built in a checkout.
	Version string `json:"version"`
	// Revision is the VCS commit of a build in a checkout, "" otherwise.
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time, "" when unknown.
	Time string `json:"revision_time,omitempty"`
	// Modified tells a build from a checkout with uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Go is the Go version the binary was built with.
	Go string `json:"go"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// version reads the binary's build information.
func (a *app) version() buildVersion {
	v := buildVersion{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := a.buildInfo()
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one line of `oncebox version`.
func (v buildVersion) String() string {
	out := "oncebox " + v.Version
	if v.Revision != "" {
		out += " (revision " + v.Revision
		if v.Time != "" {
			out += " of " + v.Time
		}
		if v.Modified {
			out += ", modified"
		}
		out += ")"
	}
	return out + ", " + v.Go + " " + v.Platform
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version the binary was built from",
		Args:  usageArgs(cobra.NoArgs),
		RunE: runE(func(*cobra.Command, []string) error {
			v := a.version()
			if a.g.json {
				return writeJSON(a.stdout, v)
			}
			_, err := fmt.Fprintln(a.stdout, v)
			return err
		}),
	}
}
