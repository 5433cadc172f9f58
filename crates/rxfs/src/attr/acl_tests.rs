use super::*;
use crate::format::attr_acl::ACL_UNDEFINED_ID;

fn ent(tag: u16, perm: u16, id: u32) -> AclEntry {
    AclEntry { tag, perm, id }
}

fn minimal(u: u16, g: u16, o: u16) -> Vec<AclEntry> {
    vec![
        ent(ACL_USER_OBJ, u, ACL_UNDEFINED_ID),
        ent(ACL_GROUP_OBJ, g, ACL_UNDEFINED_ID),
        ent(ACL_OTHER, o, ACL_UNDEFINED_ID),
    ]
}

fn extended() -> Vec<AclEntry> {
    vec![
        ent(ACL_USER_OBJ, 7, ACL_UNDEFINED_ID),
        ent(ACL_USER, 6, 1234),
        ent(ACL_GROUP_OBJ, 5, ACL_UNDEFINED_ID),
        ent(ACL_GROUP, 4, 99),
        ent(ACL_MASK, 6, ACL_UNDEFINED_ID),
        ent(ACL_OTHER, 0, ACL_UNDEFINED_ID),
    ]
}

#[test]
fn validity() {
    assert!(valid(&minimal(7, 5, 5)).is_ok());
    assert!(valid(&extended()).is_ok());
    let mut no_mask = extended();
    no_mask.remove(4);
    assert!(valid(&no_mask).is_err());
    let mut swapped = minimal(7, 5, 5);
    swapped.swap(0, 1);
    assert!(valid(&swapped).is_err());
    assert!(valid(&minimal(8, 5, 5)).is_err());
    assert!(valid(&minimal(7, 5, 5)[..2]).is_err());
}

#[test]
fn mode_equivalence() {
    assert_eq!(equiv_mode(&minimal(6, 4, 0), 0o100777), (0o100640, false));
    // With a mask the group bits are the mask's.
    assert_eq!(equiv_mode(&extended(), 0o100000), (0o100760, true));
}

#[test]
fn create_masquerade() {
    let mut a = extended();
    let mut mode = 0o100644;
    assert!(create_masq(&mut a, &mut mode));
    // USER_OBJ 7 & 6 = 6; mask 6 & 4 = 4; other 0.
    assert_eq!(mode, 0o100640);
    assert_eq!(a[0].perm, 6);
    assert_eq!(a[4].perm, 4);
    assert_eq!(a[2].perm, 5, "group_obj untouched when a mask exists");
    let mut m = minimal(7, 5, 5);
    let mut mode = 0o040750;
    assert!(!create_masq(&mut m, &mut mode));
    assert_eq!(mode, 0o040750);
    assert_eq!(m[2].perm, 0);
}

#[test]
fn permission_checks() {
    let a = extended();
    let who = |uid, gid| Caller {
        uid,
        gid,
        groups: &[],
    };
    assert!(permits(&a, 10, 20, &who(10, 0), 7));
    // Named user 1234: rw- masked by rw-.
    assert!(permits(&a, 10, 20, &who(1234, 0), 6));
    assert!(!permits(&a, 10, 20, &who(1234, 0), 1));
    // Owning group r-x masked by rw-: read yes, execute no.
    assert!(permits(&a, 10, 20, &who(5, 20), 4));
    assert!(!permits(&a, 10, 20, &who(5, 20), 1));
    // Group 99 via supplementary groups: r--.
    let g = [99];
    let c = Caller {
        uid: 5,
        gid: 1,
        groups: &g,
    };
    assert!(permits(&a, 10, 20, &c, 4));
    assert!(!permits(&a, 10, 20, &c, 2));
    // Others: nothing.
    assert!(!permits(&a, 10, 20, &who(5, 1), 4));
}

#[test]
fn chmod_updates_mask_not_group() {
    let mut a = extended();
    chmod_acl(&mut a, 0o754);
    assert_eq!((a[0].perm, a[2].perm, a[4].perm, a[5].perm), (7, 5, 5, 4));
    let mut m = minimal(7, 7, 7);
    chmod_acl(&mut m, 0o640);
    assert_eq!((m[0].perm, m[1].perm, m[2].perm), (6, 4, 0));
}
