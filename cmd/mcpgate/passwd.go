package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/mcpgate/mcpgate/internal/authserver"
)

var passwdCmd = command{
	name:     "passwd",
	synopses: []string{"passwd"},
	summary:  "print the password hash of a user of the built-in authorization server",
	about: `Passwd reads a password and prints its argon2id hash (a PHC string,
"$argon2id$v=19$m=65536,t=3,p=4$..."), the value of a user's
"passwordHash" in gateway.auth.server.users:

  {"gateway": {"auth": {"server": {"users": [
    {"name": "me", "passwordHash": "$argon2id$v=19$m=65536,t=3,p=4$..."}]}}}}

From a terminal it asks for the password twice, without echoing it, and
fails if the two differ. Otherwise it reads one line of stdin (so
'mcpgate passwd < file' and a pipe work; the line's end is not part of
the password). The password itself is never printed, and passwords
shorter than 8 characters get a warning on stderr. Exit status 1 for an
empty password, entries that differ or a read error.`,
}

// What passwd reads from; tests replace them.
var (
	passwdInput    io.Reader = os.Stdin
	passwdFD                 = int(os.Stdin.Fd())
	passwdTerminal           = term.IsTerminal
	passwdRead               = term.ReadPassword
)

// maxPasswordLine bounds the line read from stdin.
const maxPasswordLine = 4096

// passwd implements `mcpgate passwd`.
func passwd(args []string, stdout, stderr io.Writer) int {
	c := &passwdCmd
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	if code, done := parseFlags(c, fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, c, "unexpected argument %q (the password is read from the terminal or stdin)", fs.Arg(0))
	}
	pw, err := readNewPassword(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgate passwd: %v\n", err)
		return exitFailure
	}
	if len([]rune(pw)) < 8 {
		fmt.Fprintln(stderr, "mcpgate passwd: warning: the password is shorter than 8 characters")
	}
	hash, err := authserver.HashPassword(pw)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgate passwd: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, hash)
	return exitOK
}

// readNewPassword reads the password: twice without echo from a
// terminal (prompts on stderr), else one line of passwdInput.
func readNewPassword(stderr io.Writer) (string, error) {
	if !passwdTerminal(passwdFD) {
		line, err := bufio.NewReader(io.LimitReader(passwdInput, maxPasswordLine)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		pw := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if pw == "" {
			return "", errors.New("no password on stdin")
		}
		return pw, nil
	}
	ask := func(prompt string) (string, error) {
		fmt.Fprint(stderr, prompt)
		b, err := passwdRead(passwdFD)
		fmt.Fprintln(stderr) // the newline the terminal did not echo
		return string(b), err
	}
	pw, err := ask("Password: ")
	if err != nil {
		return "", err
	}
	if pw == "" {
		return "", errors.New("empty password")
	}
	again, err := ask("Password again: ")
	if err != nil {
		return "", err
	}
	if again != pw {
		return "", errors.New("the two passwords differ")
	}
	return pw, nil
}
