// Package architecture holds no code, only the tests that keep the tree's
// shape (docs/layout.md): each layer imports only those below it, no
// message below cmd/ names a flag, and packages and the command layer's
// entry points stay within their sizes.
package architecture
