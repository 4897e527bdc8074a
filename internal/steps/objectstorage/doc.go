// Package objectstorage holds the object storage steps: upload a file or a
// directory to an obs:// URI and download an object or a prefix into a
// directory (the SDK's upload and download, spec part (b) "File
// transfer").
//
// DESIGN places these steps in internal/steps/easymaker; they live in a
// package of their own because they share nothing with the ML API but the
// URIs, and so that the two families can be built and tested apart.
//
// Local paths are relative to the playbook directory and never leave it:
// every file is opened through an *os.Root (no .., no absolute path, no
// symbolic link out). Downloads are written 0600 through a temporary file
// renamed into place. The connection (default "objectstorage") is read by
// internal/cloud/objectstorage.ConfigFrom.
package objectstorage
