package main

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
	"github.com/spf13/pflag"
)

// Libraries name the configuration field at fault (field.Error, by its JSON
// name); only this package knows flags. flagError maps such an error to the
// flag that sets the field and makes it a usage error (exit status 2), so
// that each command has one place where its settings are judged.

// flagError turns err, when it is about a field of cfg (a pointer to the
// configuration fs's flags were registered into), into a usage error naming
// that flag. Other errors, and fields no flag sets (a resumed run's saved
// settings), pass unchanged.
func flagError(fs *pflag.FlagSet, cfg any, err error) error {
	var fe *field.Error
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	name := flagFor(fs, cfg, fe.Name)
	if name == "" {
		return err
	}
	return usageError{fmt.Errorf("--%s %s %s%s", name, field.Format(fe.Value), fe.Reason, hintsFor(err))}
}

// hints are the command lines and flags that do what a library's error
// advises, which only this package can write.
var hints = []struct {
	err     error
	command string
}{
	{data.ErrNoSplit, "micrograph featurize --split scaffold"},
	{suite.ErrRandomRunsStale, "leave --random-from out"},
	{data.ErrNoSMILESColumn, "--smiles-columns NAME names it"},
	{data.ErrNotANumber, "--target-columns A,B names the label columns, or --ignore-columns those that are not"},
	{data.ErrUnnamedColumn, "--target-columns A,B names the label columns"},
}

// hintsFor is the hints for err, each in parentheses after a space, or "".
func hintsFor(err error) string {
	var s string
	for _, h := range hints {
		if errors.Is(err, h.err) {
			s += " (" + h.command + ")"
		}
	}
	return s
}

// savedError is flagError for a command whose settings come from a saved
// file (a resumed run's config.json) where no flag of the command line
// overrides them: a field whose flag was given is that flag's misuse, any
// other is the file's (status 1, naming it), not a flag nobody gave.
func savedError(fs *pflag.FlagSet, cfg any, file string, err error) error {
	var fe *field.Error
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	if name := flagFor(fs, cfg, fe.Name); name != "" && fs.Changed(name) {
		return flagError(fs, cfg, err)
	}
	return field.InFile(file, err)
}

// flagFor is the flag of fs that sets the field named path (dotted JSON
// names) of the struct cfg points to: the flag registered with that field's
// address, else the flag named as the field's last name with dashes (slice
// flags, and fields filled from another flag's value), else "".
func flagFor(fs *pflag.FlagSet, cfg any, path string) string {
	if addr, ok := field.Addr(cfg, path); ok {
		var name string
		fs.VisitAll(func(f *pflag.Flag) {
			if v := reflect.ValueOf(f.Value); name == "" && f.Deprecated == "" && v.Kind() == reflect.Pointer && v.Pointer() == addr {
				name = f.Name
			}
		})
		if name != "" {
			return name
		}
	}
	last := path[strings.LastIndexByte(path, '.')+1:]
	if renamed, ok := flagNames[last]; ok {
		last = renamed
	}
	if f := fs.Lookup(strings.ReplaceAll(last, "_", "-")); f != nil {
		return f.Name
	}
	return ""
}

// flagNames are the fields whose flag is not their JSON name with dashes.
var flagNames = map[string]string{"encoder_path": "encoder", "encoder_paths": "encoder", "smiles_column": "smiles-columns"}
