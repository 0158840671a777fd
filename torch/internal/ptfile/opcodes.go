package ptfile

import "fmt"

// Pickle opcodes (Python's Lib/pickle.py). Only those that torch.save uses
// for a state dict have constants; the rest have names for error messages.
const (
	opMark       = '('
	opStop       = '.'
	opBinInt     = 'J'
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opNone       = 'N'
	opBinPersID  = 'Q'
	opReduce     = 'R'
	opBinUnicode = 'X'
	opAppend     = 'a'
	opBuild      = 'b'
	opGlobal     = 'c'
	opEmptyDict  = '}'
	opAppends    = 'e'
	opBinGet     = 'h'
	opLongBinGet = 'j'
	opEmptyList  = ']'
	opBinPut     = 'q'
	opLongBinPut = 'r'
	opSetItem    = 's'
	opTuple      = 't'
	opEmptyTuple = ')'
	opSetItems   = 'u'
	opBinFloat   = 'G'
	opProto      = 0x80
	opTuple1     = 0x85
	opTuple2     = 0x86
	opTuple3     = 0x87
	opNewTrue    = 0x88
	opNewFalse   = 0x89
	opLong1      = 0x8a
)

var opNames = map[byte]string{
	'(': "MARK", '.': "STOP", '0': "POP", '1': "POP_MARK", '2': "DUP",
	'F': "FLOAT", 'I': "INT", 'J': "BININT", 'K': "BININT1", 'L': "LONG",
	'M': "BININT2", 'N': "NONE", 'P': "PERSID", 'Q': "BINPERSID", 'R': "REDUCE",
	'S': "STRING", 'T': "BINSTRING", 'U': "SHORT_BINSTRING", 'V': "UNICODE",
	'X': "BINUNICODE", 'a': "APPEND", 'b': "BUILD", 'c': "GLOBAL", 'd': "DICT",
	'}': "EMPTY_DICT", 'e': "APPENDS", 'g': "GET", 'h': "BINGET", 'i': "INST",
	'j': "LONG_BINGET", 'l': "LIST", ']': "EMPTY_LIST", 'o': "OBJ", 'p': "PUT",
	'q': "BINPUT", 'r': "LONG_BINPUT", 's': "SETITEM", 't': "TUPLE",
	')': "EMPTY_TUPLE", 'u': "SETITEMS", 'G': "BINFLOAT",
	0x80: "PROTO", 0x81: "NEWOBJ", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4",
	0x85: "TUPLE1", 0x86: "TUPLE2", 0x87: "TUPLE3", 0x88: "NEWTRUE",
	0x89: "NEWFALSE", 0x8a: "LONG1", 0x8b: "LONG4",
	'B': "BINBYTES", 'C': "SHORT_BINBYTES",
	0x8c: "SHORT_BINUNICODE", 0x8d: "BINUNICODE8", 0x8e: "BINBYTES8",
	0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x92: "NEWOBJ_EX",
	0x93: "STACK_GLOBAL", 0x94: "MEMOIZE", 0x95: "FRAME",
	0x96: "BYTEARRAY8", 0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER",
}

func opName(op byte) string {
	if name, ok := opNames[op]; ok {
		return fmt.Sprintf("%s (0x%02x)", name, op)
	}
	return fmt.Sprintf("0x%02x", op)
}
