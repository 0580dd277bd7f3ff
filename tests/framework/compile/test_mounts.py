"""Reading /proc/self/mountinfo (proc(5)): the fields, escapes, the mount a path is on."""

from __future__ import annotations

from pathlib import Path

from cuda_doctor.framework.compile.mounts import (
    inside_root,
    is_network,
    mount_of,
    nearest_existing,
    parse_mountinfo,
    unescape,
)

TEXT = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
30 22 0:50 / /home rw,relatime shared:2 master:7 - nfs4 filer:/export/home rw,vers=4.2
31 22 0:51 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw
32 22 0:52 / /tmp rw,relatime - tmpfs tmpfs rw
33 22 0:53 / /srv/a\\040b rw - fuse.sshfs me@host:/x rw
34 22 8:2 / /usr/local/nvidia ro,nosuid - squashfs /dev/vdb ro
not a mountinfo line
35 22 0:54 / /broken rw -
"""


def test_fields_options_and_escapes() -> None:
    mounts = parse_mountinfo(TEXT)
    assert [m.point for m in mounts] == ["/", "/home", "/tmp", "/tmp", "/srv/a b", "/usr/local/nvidia"]
    assert mounts[0].options == ("rw", "relatime", "errors=remount-ro")  # mount and superblock options, once each
    assert (mounts[1].fstype, mounts[1].source) == ("nfs4", "filer:/export/home")  # after optional fields
    assert "noexec" in mounts[2].options
    assert "ro" in mounts[5].options
    assert unescape("a\\040b\\011c\\134d\\12") == "a b\tc\\d\\12"


def test_the_mount_a_path_is_on() -> None:
    mounts = parse_mountinfo(TEXT)
    assert mount_of("/home/alice/.triton", mounts) == mounts[1]
    assert mount_of("/homework", mounts) == mounts[0]  # a prefix of the name is not a parent
    assert mount_of("/tmp/x", mounts) == mounts[3]  # the last mounted on a point is the one on top
    assert mount_of("/srv/a b/cache", mounts) == mounts[4]
    assert mount_of("/", mounts) == mounts[0]
    assert mount_of("/x", []) is None


def test_network_types() -> None:
    assert all(is_network(t) for t in ("nfs", "nfs4", "cifs", "fuse.sshfs", "fuse", "lustre"))
    assert not any(is_network(t) for t in ("ext4", "xfs", "tmpfs", "overlay", "squashfs", "fuseblk2"))


def test_nearest_existing_folder_within_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "home" / "alice").mkdir(parents=True)
    assert nearest_existing(root / "home" / "alice" / ".triton" / "cache", root) == root / "home" / "alice"
    assert nearest_existing(root / "nothing" / "here", root) == root
    (root / "file").write_text("")
    assert nearest_existing(root / "file" / "below", root) == root
    assert nearest_existing(tmp_path / "elsewhere" / "x", root) == tmp_path  # outside the root: its own parents
    assert inside_root(root / "home", root) == "/home"
    assert inside_root(root, root) == "/"
