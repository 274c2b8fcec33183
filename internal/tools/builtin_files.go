package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"
)

func (b *builtins) read() BuiltinTool {
	return BuiltinTool{
		Name: "read",
		Description: "Read a text file in the workspace. The result shows each line with its line number " +
			"(like cat -n), at most 2000 lines or 256 KiB per call; lines longer than 2000 bytes are cut. " +
			"For a long file, pass offset (the first line to show, counting from 1) and limit (how many lines) " +
			"to read it in parts. Paths are relative to the workspace root. Binary files are refused.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The file to read, relative to the workspace root."},` +
			`"offset":{"type":"integer","minimum":1,"description":"The line number to start at, counting from 1. Default 1."},` +
			`"limit":{"type":"integer","minimum":1,"description":"How many lines to read. Default and maximum 2000."}` +
			`},"required":["path"]}`),
		ReadOnly: true,
		Run:      b.runRead,
		Subject:  b.pathSubject("read", ""),
	}
}

func (b *builtins) runRead(_ context.Context, input json.RawMessage) Result {
	var args struct {
		Path   string  `json:"path"`
		Offset flexInt `json:"offset"`
		Limit  flexInt `json:"limit"`
	}
	if r, ok := decodeBuiltinArgs("read", input, &args); !ok {
		return r
	}
	if args.Path == "" {
		return missingArgs("read", "path")
	}
	rel, r, ok := b.rel(args.Path)
	if !ok {
		return r
	}
	f, err := b.open(rel)
	if err != nil {
		return fsFailure("read", args.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return fsFailure("read", args.Path, err)
	case fi.IsDir():
		return toolErrorf("%q is a directory; use ls to list it.", args.Path)
	case !fi.Mode().IsRegular():
		return toolErrorf("%q is not a regular file (it is a device, pipe or socket); read shows text files only.", args.Path)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffBytes); bytes.IndexByte(head, 0) >= 0 {
		return toolErrorf("%q looks like a binary file (it contains NUL bytes); read shows text files only.", args.Path)
	}
	first := max(int(args.Offset), 1)
	limit := int(args.Limit)
	if limit <= 0 || limit > maxReadLines {
		limit = maxReadLines
	}
	return readNumberedLines(br, args.Path, first, limit)
}

// readNumberedLines numbers lines first..first+limit-1 of br, stopping early at
// maxReadBytes, and says how to read on when the file continues.
func readNumberedLines(br *bufio.Reader, p string, first, limit int) Result {
	var out strings.Builder
	n, shownLines := 0, 0
	for {
		line, cut, err := readCappedLine(br, maxLineBytes)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fsFailure("read", p, err)
		}
		n++
		if n < first {
			continue
		}
		if shownLines == limit || out.Len() >= maxReadBytes {
			fmt.Fprintf(&out, "\n[Showing lines %d-%d; the file continues. Call read with offset %d to read more.]", first, n-1, n)
			return textResult(out.String(), false)
		}
		fmt.Fprintf(&out, "%6d\t%s", n, line)
		if cut {
			out.WriteString(" [... line cut at 2000 bytes]")
		}
		out.WriteByte('\n')
		shownLines++
	}
	switch {
	case n == 0:
		return textResult(fmt.Sprintf("(%q is empty.)", p), false)
	case shownLines == 0:
		return toolErrorf("%q has %d lines; offset %d is past the end.", p, n, first)
	}
	return textResult(out.String(), false)
}

// readCappedLine reads one line without its line ending, keeping at most limit
// bytes of it (cut at a character boundary) and reporting whether more
// were dropped. It returns io.EOF only when there was nothing to read.
func readCappedLine(br *bufio.Reader, limit int) ([]byte, bool, error) {
	var line []byte
	cut, read := false, false
	for {
		frag, err := br.ReadSlice('\n')
		read = read || len(frag) > 0
		frag = bytes.TrimSuffix(frag, []byte{'\n'})
		if room := limit - len(line); len(frag) > room {
			line = append(line, frag[:max(room, 0)]...)
			cut = true
		} else {
			line = append(line, frag...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && !read:
			return nil, false, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, false, err
		}
		if cut {
			line = trimPartialRune(line)
		}
		return bytes.TrimSuffix(line, []byte{'\r'}), cut, nil
	}
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

func (b *builtins) write() BuiltinTool {
	return BuiltinTool{
		Name: "write",
		Description: "Write a file in the workspace, replacing it if it exists and creating missing parent " +
			"directories. Give the whole new content; to change part of an existing file, edit is safer. " +
			"Paths are relative to the workspace root.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The file to write, relative to the workspace root."},` +
			`"content":{"type":"string","description":"The complete content of the file."}` +
			`},"required":["path","content"]}`),
		Run:     b.runWrite,
		Subject: b.pathSubject("write", ""),
	}
}

func (b *builtins) runWrite(_ context.Context, input json.RawMessage) Result {
	var args struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if r, ok := decodeBuiltinArgs("write", input, &args); !ok {
		return r
	}
	switch {
	case args.Path == "" && args.Content == nil:
		return missingArgs("write", "path", "content")
	case args.Path == "":
		return missingArgs("write", "path")
	case args.Content == nil:
		return missingArgs("write", "content")
	}
	if len(*args.Content) > maxWriteBytes {
		return toolErrorf("The content is %d bytes, more than write takes (%d). Write the file in parts (write the first part, then append with bash) or generate it with a command.", len(*args.Content), maxWriteBytes)
	}
	rel, r, ok := b.rel(args.Path)
	if !ok {
		return r
	}
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	root := b.ws.Root()
	verb := "Created"
	if fi, err := root.Lstat(rel); err == nil {
		switch {
		case fi.IsDir():
			return toolErrorf("%q is a directory; write needs the path of a file.", args.Path)
		case !fi.Mode().IsRegular():
			return toolErrorf("%q is not a regular file (it is a device, pipe or socket); write replaces files only.", args.Path)
		case linkedElsewhere(fi):
			return hardLinked("write", args.Path)
		}
		verb = "Overwrote"
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); errors.Is(err, fs.ErrExist) {
			return toolErrorf("A parent of %q is a file, not a directory.", args.Path)
		} else if err != nil {
			return fsFailure("create the directories of", args.Path, err)
		}
	}
	// An existing file keeps its mode: WriteFile truncates it in place.
	if err := root.WriteFile(rel, []byte(*args.Content), 0o644); err != nil {
		return fsFailure("write", args.Path, err)
	}
	return textResult(fmt.Sprintf("%s %s (%d bytes).", verb, rel, len(*args.Content)), false)
}

func (b *builtins) edit() BuiltinTool {
	return BuiltinTool{
		Name: "edit",
		Description: "Replace text in a file in the workspace. old_string must match the file exactly, " +
			"whitespace and indentation included (copy it from read's output without the line-number prefix), " +
			"and must occur exactly once unless replace_all is true; include a few surrounding lines to make it unique. " +
			"To create a file, use write.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The file to edit, relative to the workspace root."},` +
			`"old_string":{"type":"string","description":"The exact text to replace."},` +
			`"new_string":{"type":"string","description":"The text to put in its place."},` +
			`"replace_all":{"type":"boolean","description":"Replace every occurrence instead of exactly one. Default false."}` +
			`},"required":["path","old_string","new_string"]}`),
		Run:     b.runEdit,
		Subject: b.pathSubject("edit", ""),
	}
}

func (b *builtins) runEdit(_ context.Context, input json.RawMessage) Result {
	var args struct {
		Path       string  `json:"path"`
		OldString  *string `json:"old_string"`
		NewString  *string `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
	}
	if r, ok := decodeBuiltinArgs("edit", input, &args); !ok {
		return r
	}
	var absent []string
	if args.Path == "" {
		absent = append(absent, "path")
	}
	if args.OldString == nil {
		absent = append(absent, "old_string")
	}
	if args.NewString == nil {
		absent = append(absent, "new_string")
	}
	if len(absent) > 0 {
		return missingArgs("edit", absent...)
	}
	oldS, newS := *args.OldString, *args.NewString
	switch {
	case oldS == "":
		return toolErrorf("old_string is empty; give the exact text to replace (to create a file, use write).")
	case oldS == newS:
		return toolErrorf("old_string and new_string are the same; there is nothing to change.")
	}
	rel, r, ok := b.rel(args.Path)
	if !ok {
		return r
	}
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	content, r, ok := b.editable(rel, args.Path)
	if !ok {
		return r
	}
	count := strings.Count(content, oldS)
	if count == 0 && strings.Contains(content, "\r\n") && strings.Contains(oldS, "\n") && !strings.Contains(oldS, "\r\n") {
		// read shows CRLF lines without their \r; match them as shown.
		oldS, newS = strings.ReplaceAll(oldS, "\n", "\r\n"), strings.ReplaceAll(newS, "\n", "\r\n")
		count = strings.Count(content, oldS)
	}
	switch {
	case count == 0:
		return toolErrorf("old_string was not found in %q. It must match the file exactly, whitespace and indentation included; read the file again and copy the text from it, without the line-number prefix.", args.Path)
	case count > 1 && !args.ReplaceAll:
		return toolErrorf("old_string occurs %d times in %q. Include more surrounding lines to make it unique, or set replace_all to true to replace every occurrence.", count, args.Path)
	}
	n := 1
	if args.ReplaceAll {
		n = -1
	}
	// The size is known before anything is built: replacing one byte by a
	// thousand, everywhere in a large file, would otherwise ask for
	// gigabytes at once.
	replaced := int64(1)
	if args.ReplaceAll {
		replaced = int64(count)
	}
	if size := int64(len(content)) + replaced*(int64(len(newS))-int64(len(oldS))); size > maxEditBytes {
		return toolErrorf("The edit would make %q %d bytes, more than edit handles (%d); replace less at a time, or use bash.", args.Path, size, maxEditBytes)
	}
	if err := b.ws.Root().WriteFile(rel, []byte(strings.Replace(content, oldS, newS, n)), 0o644); err != nil {
		return fsFailure("write", args.Path, err)
	}
	if count == 1 {
		return textResult(fmt.Sprintf("Edited %s: replaced 1 occurrence.", rel), false)
	}
	return textResult(fmt.Sprintf("Edited %s: replaced %d occurrences.", rel, count), false)
}

// editable reads a file edit may change: an existing text file of at most
// maxEditBytes.
func (b *builtins) editable(rel, p string) (string, Result, bool) {
	root := b.ws.Root()
	fi, err := root.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", toolErrorf("%q does not exist; use write to create a file.", p), false
	case err == nil && linkedElsewhere(fi):
		return "", hardLinked("edit", p), false
	case err != nil:
		return "", fsFailure("edit", p, err), false
	case fi.IsDir():
		return "", toolErrorf("%q is a directory; edit changes files.", p), false
	case !fi.Mode().IsRegular():
		return "", toolErrorf("%q is not a regular file (it is a device, pipe or socket); edit changes text files only.", p), false
	case fi.Size() > maxEditBytes:
		return "", toolErrorf("%q is %d bytes, more than edit handles (%d); change it with bash instead.", p, fi.Size(), maxEditBytes), false
	}
	data, err := root.ReadFile(rel)
	if err != nil {
		return "", fsFailure("read", p, err), false
	}
	if bytes.IndexByte(data[:min(len(data), sniffBytes)], 0) >= 0 {
		return "", toolErrorf("%q looks like a binary file (it contains NUL bytes); edit changes text files only.", p), false
	}
	return string(data), Result{}, true
}

func (b *builtins) ls() BuiltinTool {
	return BuiltinTool{
		Name: "ls",
		Description: "List a directory in the workspace, sorted by name. Directories end with /, symbolic links " +
			"with @. Without path, lists the workspace root.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The directory to list, relative to the workspace root. Default: the root."}` +
			`},"required":[]}`),
		ReadOnly: true,
		Run:      b.runLs,
		Subject:  b.pathSubject("ls", "."),
	}
}

func (b *builtins) runLs(_ context.Context, input json.RawMessage) Result {
	var args struct {
		Path string `json:"path"`
	}
	if r, ok := decodeBuiltinArgs("ls", input, &args); !ok {
		return r
	}
	if args.Path == "" {
		args.Path = "."
	}
	rel, r, ok := b.rel(args.Path)
	if !ok {
		return r
	}
	f, err := b.open(rel)
	if err != nil {
		return fsFailure("list", args.Path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return fsFailure("list", args.Path, err)
	} else if !fi.IsDir() {
		return toolErrorf("%q is a file, not a directory; use read to see its content.", args.Path)
	}
	// Read in batches and keep at most maxWalkEntries: a command can fill
	// a directory with millions of names.
	var entries []fs.DirEntry
	total := 0
	for {
		batch, err := f.ReadDir(1024)
		total += len(batch)
		entries = append(entries, batch[:min(len(batch), maxWalkEntries-len(entries))]...)
		if errors.Is(err, io.EOF) || len(batch) == 0 {
			break
		}
		if err != nil {
			return fsFailure("list", args.Path, err)
		}
	}
	slices.SortFunc(entries, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	if len(entries) == 0 {
		return textResult("(empty directory)", false)
	}
	var out strings.Builder
	for i, e := range entries {
		if i == maxListEntries {
			fmt.Fprintf(&out, "[... %d more entries not shown]\n", total-i)
			break
		}
		out.WriteString(e.Name())
		switch {
		case e.IsDir():
			out.WriteByte('/')
		case e.Type()&fs.ModeSymlink != 0:
			out.WriteByte('@')
		}
		out.WriteByte('\n')
	}
	return textResult(out.String(), false)
}

// linkedElsewhere reports whether the file has other hard links. A command
// can link a file from outside the workspace into it (ln /etc/x here),
// and writing through the link would change the outside file, which path
// confinement cannot see. A file the workspace links twice is refused
// too: nothing tells the two cases apart.
func linkedElsewhere(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink > 1
}

func hardLinked(verb, p string) Result {
	return toolErrorf("%q has more than one hard link, so it may be a file outside the workspace; %s does not change such files. Copy it to a new file first if you need to change it.", p, verb)
}
