// Package notice holds the help-center step types: notice.categories,
// notice.tags, notice.list, notice.get, notice.attachment and
// notice.digest. Each reaches the help center through the client in
// internal/cloud/helpcenter, with the settings of a named connection
// (param `connection`, default "helpcenter").
//
// Notices reach playbooks in one normalised shape (see Notice): id, title,
// category_id, category, pinned, display_at and updated_at as RFC 3339,
// tags as a list, is_new, and url when the connection names a notice page.
//
// # Files
//
// notice.attachment and the file target of notice.digest write only below
// the playbook's directory. Paths are opened through os.Root, so neither
// ".." nor a symbolic link can lead out of it; a file name that would leave
// the directory is refused, not rewritten. Files are written to a temporary
// name, then renamed, with mode 0600.
//
// # The digest
//
// notice.digest posts the notices that are new or updated since a cursor
// kept in the state store, keyed by connection, service ID and filters
// (language, category, tag, query). The cursor is a watermark: the newest
// update time seen and the IDs updated at exactly that millisecond. It
// never relies on list position (pinned notices come first in the default
// order), and it only moves forward.
//
// Delivery is exactly once for the cursor and at least once, with one
// stable idempotency key, for the receiver: before posting, the step
// checkpoints the digest (body, notice IDs, cursor before and after, key);
// after a 2xx it checkpoints "posted", then saves the cursor. A resumed
// step that finds "posted" only saves the cursor; one that finds
// "posting" (the process died before the answer was recorded) sends the
// very same body again with the same Idempotency-Key header, which a
// receiver that deduplicates by key drops. No HTTP target can do better:
// the answer to a request can always be lost after the receiver acted.
// The file target needs no key: an append whose block is already at the
// end of the file is not repeated.
package notice
