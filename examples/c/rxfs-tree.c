/*
 * rxfs-tree: the example program of rxfs's C interface (rxfs.h, librxfs).
 *
 *   rxfs-tree IMAGE              list every path: octal mode, size, path
 *   rxfs-tree IMAGE cat PATH     copy a file of the image to stdout
 *   rxfs-tree IMAGE put PATH     copy stdin into a new file of the image,
 *                                tagged with the xattr user.origin
 *
 * Build: cc rxfs-tree.c $(pkg-config --cflags --libs rxfs) -o rxfs-tree
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rxfs.h>

static int fail(const char *what, int err)
{
	fprintf(stderr, "rxfs-tree: %s: %s (%s)\n", what, rxfs_last_error(), strerror(err));
	return 1;
}

/* Print `path` and, for a directory, everything below it. */
static int list(struct rxfs_fs *fs, const char *path)
{
	struct rxfs_stat st;
	int err = rxfs_stat(fs, path, 0, &st);
	if (err)
		return fail(path, err);
	printf("%06o %llu %s\n", st.mode, (unsigned long long)st.size, path);
	if (!S_ISDIR(st.mode))
		return 0;
	struct rxfs_dir *dir;
	err = rxfs_opendir(fs, path, &dir);
	if (err)
		return fail(path, err);
	struct rxfs_dirent ent;
	int rc = 0;
	while (!(err = rxfs_readdir(dir, &ent)) && ent.name) {
		size_t n = strlen(path) + strlen(ent.name) + 2;
		char *child = malloc(n);
		if (!child) {
			rc = 1;
			break;
		}
		snprintf(child, n, "%s%s%s", path, strcmp(path, "/") ? "/" : "", ent.name);
		rc |= list(fs, child);
		free(child);
	}
	if (err)
		rc = fail(path, err);
	rxfs_closedir(dir);
	return rc;
}

static int cat(struct rxfs_fs *fs, const char *path)
{
	struct rxfs_file *f;
	int err = rxfs_file_open(fs, path, RXFS_OPEN_READ, 0, &f);
	if (err)
		return fail(path, err);
	char buf[65536];
	uint64_t off = 0;
	size_t got;
	while (!(err = rxfs_file_read(f, off, (uint8_t *)buf, sizeof buf, &got)) && got) {
		fwrite(buf, 1, got, stdout);
		off += got;
	}
	rxfs_file_close(f);
	return err ? fail(path, err) : 0;
}

static int put(struct rxfs_fs *fs, const char *path)
{
	struct rxfs_file *f;
	int err = rxfs_file_open(fs, path, RXFS_OPEN_WRITE | RXFS_OPEN_CREATE | RXFS_OPEN_EXCL, 0644, &f);
	if (err)
		return fail(path, err);
	char buf[65536];
	uint64_t off = 0;
	size_t n, done;
	while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
		err = rxfs_file_write(f, off, (const uint8_t *)buf, n, &done);
		if (err)
			break;
		off += done;
	}
	if (!err)
		err = rxfs_file_fsync(f);
	int cerr = rxfs_file_close(f);
	if (err || cerr)
		return fail(path, err ? err : cerr);
	const char *origin = "c-example";
	err = rxfs_setxattr(fs, path, "user.origin", (const uint8_t *)origin, strlen(origin), 0, 1);
	return err ? fail(path, err) : 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 4) {
		fprintf(stderr, "usage: %s IMAGE [cat|put PATH]\n", argv[0]);
		return 2;
	}
	int writing = argc == 4 && !strcmp(argv[2], "put");
	struct rxfs_open_options opts = { .writable = writing };
	struct rxfs_fs *fs;
	int err = rxfs_open(argv[1], &opts, &fs);
	if (err)
		return fail(argv[1], err);
	int rc;
	if (argc == 2)
		rc = list(fs, "/");
	else if (!strcmp(argv[2], "cat"))
		rc = cat(fs, argv[3]);
	else if (writing)
		rc = put(fs, argv[3]);
	else {
		fprintf(stderr, "%s: unknown command %s\n", argv[0], argv[2]);
		rc = 2;
	}
	err = rxfs_close(fs);
	if (err)
		return fail("close", err);
	return rc;
}
