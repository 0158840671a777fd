// Command micrograph pre-trains graph neural networks on molecules with the
// MICRO-Graph method and evaluates them; see `micrograph --help`.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runpool"
	"github.com/spf13/pflag"
)

// command is one subcommand: its name, a one-line summary for the overview,
// and its entry point, which parses its own flags from args.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

// commands lists the subcommands in the order the overview shows them.
var commands = []command{
	{"pretrain", "pre-train an encoder with MICRO-Graph, with checkpoints and resume", runPretrain},
	{"export", "write a run's or a shipped model's encoder (or motif model) for use here or in PyTorch", runExport},
	{"motifs", "write an HTML report of a run's motifs and their closest subgraphs", runMotifs},
	{"explain", "say which motifs each atom of your molecules belongs to, as CSV or JSON Lines and a page", runExplain},
	{"diagnose", "measure collapse, motif use, subgraph sizes and saturation of an encoder (docs/fidelity.md)", runDiagnose},
	{"diagnose-plot", "draw figures of several diagnose results side by side as an SVG", runDiagnosePlot},
	{"plot", "draw a run's loss parts over the steps as an SVG", runPlot},
	{"embed", "write the graph embedding of every molecule of a file, as .npy or .csv", runEmbed},
	{"predict", "predict properties of every molecule of a file with a model saved by finetune --save", runPredict},
	{"finetune", "fine-tune an encoder on a labelled dataset; ROC-AUC over seeds (docs/method.md §7)", runFinetune},
	{"linear-eval", "fit linear classifiers on a frozen encoder's embeddings; ROC-AUC over seeds", runLinearEval},
	{"suite", "run both protocols on the seven benchmarks and print the paper-style table", runSuite},
	{"compare", "print finetune and linear-eval results side by side", runCompare},
	{"bench", "time pre-training steps and print one JSON line", runBench},
	{"featurize", "turn a CSV file of SMILES and labels into an OGB dataset folder", runFeaturize},
	{"synth", "write the built-in synthetic dataset of planted functional groups", runSynth},
	{"version", "print the versions of micrograph, libtorch and RDKit, and whether CUDA works", runVersion},
}

// stdout receives the subcommands' reports and notes their remarks on
// stderr (such as the rows a featurisation rejected); tests replace both.
var (
	stdout io.Writer = os.Stdout
	notes  io.Writer = os.Stderr
)

func main() {
	runenv.RestartWithLibrarySettings()
	// Every command runs tensors: their freed memory is kept for the next
	// batch instead of being returned to the kernel and faulted in again.
	torch.TuneAllocator()
	// A process that an evaluation started to make its runs side by side
	// (finetune, linear-eval, suite) serves them and exits here.
	runpool.ServeIfWorker(evaluate.Runs)
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run dispatches to a subcommand and turns its outcome into an exit status:
// 0 on success (and for --help), 2 for misuse of the command line, 1 for
// any other failure. Errors are one line on stderr.
func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		overview(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		overview(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		if c.name != "pretrain" {
			// pretrain finishes its step and checkpoints on SIGINT; every
			// other command is ended by it, without its temporary files.
			atomicfile.RemoveTempsOnInterrupt()
		}
		err := runReporting(c, args[1:])
		var usage usageError
		if err != nil {
			// One line, whatever the error joined (a full disk fails every file at once).
			err = oneLine{err}
		}
		switch {
		case err == nil:
			return 0
		case errors.Is(err, pflag.ErrHelp):
			return 0
		case errors.As(err, &usage):
			fmt.Fprintf(stderr, "micrograph %s: %v (see micrograph %s --help)\n", c.name, err, c.name)
			return 2
		default:
			fmt.Fprintf(stderr, "micrograph %s: %v%s\n", c.name, err, hintsFor(err))
			return 1
		}
	}
	fmt.Fprintf(stderr, "micrograph: unknown command %q (see micrograph --help)\n", args[0])
	return 2
}

// runReporting runs c with stdout kept by a reportWriter: a report that
// could not be written (a full disk) fails the command rather than ending
// with status 0 and nothing written.
func runReporting(c command, args []string) error {
	out := &reportWriter{w: stdout}
	saved := stdout
	stdout = out
	defer func() { stdout = saved }()
	err := c.run(args)
	if err == nil && out.err != nil {
		return fmt.Errorf("the report could not be written: %w", out.err)
	}
	return err
}

// reportWriter passes writes on to w and keeps the first error, after
// which it writes nothing more.
type reportWriter struct {
	w   io.Writer
	err error
}

func (r *reportWriter) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	r.err = err
	return n, err
}

func overview(w io.Writer) {
	fmt.Fprintln(w, "usage: micrograph COMMAND [flags]   (micrograph COMMAND --help for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
}

// oneLine shows an error on a single line, each word of it (a run of
// bytes without spaces: a flag's value, a path) cut to its first 64 bytes
// when longer than maxWord, as what a file holds is quoted.
type oneLine struct{ error }

// maxWord is the longest word an error shows whole: beyond any path Linux
// opens (4095 bytes) a word names nothing, and long before it no one reads it.
const maxWord = 256

func (e oneLine) Error() string {
	words := strings.Split(strings.ReplaceAll(e.error.Error(), "\n", "; "), " ")
	for i, w := range words {
		if len(w) > maxWord {
			words[i] = inputfile.Shorten(w)
		}
	}
	return strings.Join(words, " ")
}
func (e oneLine) Unwrap() error { return e.error }

// usageError is a mistake on the command line rather than a failure of the work.
type usageError struct{ error }

// newFlags makes a subcommand's flag set; its --help text is usage (after
// "micrograph NAME ") followed by about and the flag defaults.
func newFlags(name, usage, about string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by run
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: %s\n\n%s\n", strings.TrimSpace("micrograph "+name+" "+usage), about)
		if !fs.HasFlags() {
			return
		}
		fmt.Fprintf(stdout, "\nflags:\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parseFlags parses args, which may hold flags only, and checks that every
// flag listed in required was given.
func parseFlags(fs *pflag.FlagSet, args []string, required ...string) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	var missing []string
	for _, name := range required {
		if !fs.Changed(name) {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return usageError{fmt.Errorf("missing %s", strings.Join(missing, ", "))}
	}
	return nil
}

// namingFlags are the flags that name a file, a folder or a model, in
// whichever command has them: given empty (an unset shell variable, say)
// they name nothing, which is misuse, not a file called "".
var namingFlags = []string{"data", "out", "run", "encoder", "model", "checkpoint", "csv", "page", "save", "random-from", "cache"}

// parseArgs parses flags followed by arguments.
func parseArgs(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	fs.Visit(func(f *pflag.Flag) { // a former name (pflag's deprecated flag) says the new one
		if f.Deprecated != "" {
			fmt.Fprintf(notes, "micrograph: --%s is now %s (the old name is read for a while)\n", f.Name, f.Deprecated)
		}
	})
	for _, name := range namingFlags {
		if f := fs.Lookup(name); f != nil && fs.Changed(name) && f.Value.Type() == "string" && f.Value.String() == "" {
			return usageError{fmt.Errorf("--%s is empty: it names a file, folder or model", name)}
		}
	}
	return nil
}

// printf writes a line of a subcommand's report on stdout.
func printf(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }

// logf writes a progress message on stderr.
func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "micrograph: "+format+"\n", args...) }

func errMissing(flag string) error { return fmt.Errorf("missing %s", flag) }
