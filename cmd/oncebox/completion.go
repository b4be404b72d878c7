package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// completeValues tells the shell completion what every command and flag of
// the tree under c takes, where cobra's default (the file names of the
// current directory) would be wrong: a flag without a completion function
// and without a file annotation (--config, --out-dir, --token-file) takes
// no file name, nor does a command's argument (an id, or none).
func completeValues(c *cobra.Command) {
	if c.ValidArgsFunction == nil && len(c.ValidArgs) == 0 {
		c.ValidArgsFunction = cobra.NoFileCompletions
	}
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			return
		}
		if _, ok := f.Annotations[cobra.BashCompFilenameExt]; ok {
			return
		}
		if _, ok := f.Annotations[cobra.BashCompSubdirsInDir]; ok {
			return
		}
		if _, ok := c.GetFlagCompletionFunc(f.Name); ok {
			return
		}
		_ = c.RegisterFlagCompletionFunc(f.Name, cobra.NoFileCompletions)
	})
	for _, sub := range c.Commands() {
		completeValues(sub)
	}
}
