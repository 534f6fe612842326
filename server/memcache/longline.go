package memcache

import (
	"bufio"
	"bytes"
)

// isRetrieval reports whether a command takes any number of keys on its line, and so may send a
// line longer than MaxLineBytes (memcached reads such a get line whole, however long).
func isRetrieval(name string) bool {
	return name == "get" || name == "gets" || name == "gat" || name == "gats"
}

// firstToken splits the command name off a line: the name, and the rest after the space that
// ends it. The name is empty when the line holds no space after it.
func firstToken(line []byte) (name string, rest []byte) {
	line = bytes.TrimLeft(line, " ")
	i := bytes.IndexByte(line, ' ')
	if i <= 0 {
		return "", nil
	}
	return string(line[:i]), line[i+1:]
}

// longLine reads the tokens of a command line longer than the read buffer, one at a time, as
// the line arrives. What the read buffer holds is used in place; only a token cut by the end of
// the buffer is carried over, cut at MaxKeyLen+1 bytes (longer is no key anyway). So a line of
// any length costs the read buffer plus one key.
type longLine struct {
	c     *conn
	chunk []byte // the part of the line in the read buffer not yet split
	last  bool   // chunk ends the line
	carry []byte // the start of a token cut by the end of the previous chunk
	cut   bool   // the carried token was longer than carry holds
	done  bool   // the whole line has been read and returned
}

// next returns the next token, or nil after the last one. The token is valid until the next
// call or read from the connection.
func (l *longLine) next() ([]byte, error) {
	for !l.done {
		if i := bytes.IndexByte(l.chunk, ' '); i >= 0 {
			tok := l.join(l.chunk[:i])
			l.chunk = l.chunk[i+1:]
			if len(tok) > 0 {
				return tok, nil
			}
			continue
		}
		if l.last {
			// The rest of the line is its last token.
			tok := l.join(l.chunk)
			l.chunk, l.done = nil, true
			if len(tok) > 0 {
				return tok, nil
			}
			continue
		}
		// The rest of the chunk starts a token the next chunk ends.
		l.hold(l.chunk)
		chunk, err := l.c.r.ReadSlice('\n')
		switch err {
		case nil:
			l.last = true
			if len(chunk) == 1 && !l.cut && len(l.carry) > 0 && l.carry[len(l.carry)-1] == '\r' {
				// The buffer ended between the line's "\r" and "\n".
				l.carry = l.carry[:len(l.carry)-1]
			}
			chunk = trimEOL(chunk)
		case bufio.ErrBufferFull:
		default:
			return nil, err
		}
		l.chunk = chunk
	}
	return nil, nil
}

// skip reads the rest of the line.
func (l *longLine) skip() error {
	for {
		tok, err := l.next()
		if tok == nil || err != nil {
			return err
		}
	}
}

// hold appends the start of a token to carry, up to MaxKeyLen+1 bytes.
func (l *longLine) hold(p []byte) {
	if l.carry == nil {
		l.carry = l.c.carry[:0]
	}
	if room := MaxKeyLen + 1 - len(l.carry); len(p) > room {
		p, l.cut = p[:room], true
	}
	l.carry = append(l.carry, p...)
	l.c.carry = l.carry
}

// join returns the token that ends with p: p itself, or the carried start with p appended.
func (l *longLine) join(p []byte) []byte {
	if len(l.carry) == 0 && !l.cut {
		return p
	}
	l.hold(p)
	tok := l.carry
	l.carry, l.cut = l.carry[:0], false
	return tok
}
