//! Team (owners, docs/dashboard.md): the business's users and roles; adding a user (a generated
//! password, shown once, through the same `create_user_by` as `api admin user create`), changing a
//! role, removing a user (their sessions end at once), never leaving the business without an owner
//! (`users::change_member` judges that in its transaction); and the audit log, paged. Each change
//! needs the owner's password again (docs/dashboard.md), so a taken-over session alone cannot add
//! an owner.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use domain::ids::UserId;
use domain::{Mode, Role};
use store::audit;
use store::paging::{PageRequest, Position};
use store::users::{self, MemberChange, MemberOutcome};

use crate::actions::users::{CreateUserError, create_user_by};
use crate::dashboard::forms::{FormFields, Posted};
use crate::dashboard::session::{Owner, Scoped};
use crate::dashboard::view::{self, Frame, PageResult, Section, When};
use crate::extract::QueryPairs;
use crate::state::AppState;

const AUDIT_PAGE_SIZE: u64 = 25;
const WRONG_PASSWORD: &str = "Your password is not right: nothing changed.";

struct RoleOption {
    value: &'static str,
    label: &'static str,
    selected: bool,
}

fn role_options(selected: Role) -> Vec<RoleOption> {
    Role::ALL
        .iter()
        .rev()
        .map(|r| RoleOption {
            value: r.as_str(),
            label: r.label(),
            selected: *r == selected,
        })
        .collect()
}

struct MemberRow {
    id: String,
    email: String,
    is_you: bool,
    totp: bool,
    added: When,
    roles: Vec<RoleOption>,
}

struct AuditRow {
    at: When,
    who: String,
    what: &'static str,
    /// Repeats folded into the row (refused sign-ins: one row a minute), shown when more than 1.
    times: i32,
    mode: Option<&'static str>,
    target: Option<String>,
    detail: Option<String>,
    from: Option<String>,
}

struct NewUser {
    email: String,
    role: &'static str,
    password: String,
}

#[derive(Default)]
struct Extra {
    notice: Option<&'static str>,
    error: Option<String>,
    new_user: Option<NewUser>,
    email_typed: String,
    audit_page: u64,
}

#[derive(Template)]
#[template(path = "team.html")]
struct TeamPage {
    frame: Frame,
    base: String,
    notice: Option<&'static str>,
    error: Option<String>,
    members: Vec<MemberRow>,
    add_roles: Vec<RoleOption>,
    email_value: String,
    new_user: Option<NewUser>,
    audit: Vec<AuditRow>,
    audit_showing: String,
    audit_page: u64,
    audit_pages: u64,
    audit_prev: Option<String>,
    audit_next: Option<String>,
}

async fn render(
    state: &AppState,
    scope: &Scoped<Owner>,
    extra: Extra,
    status: StatusCode,
) -> PageResult {
    let business_id = scope.business_id();
    let me = &scope.signed.owner.user.id;
    let members = users::list_for_business(&state.db, business_id)
        .await?
        .into_iter()
        .map(|u| MemberRow {
            is_you: &u.id == me,
            totp: u.has_totp(),
            added: When::of(&u.created_at),
            roles: role_options(u.role),
            id: u.id.to_string(),
            email: u.email,
        })
        .collect();
    let page = extra.audit_page.max(1);
    let (fetched, total) = audit::list(
        &state.db,
        business_id,
        &PageRequest {
            page_size: AUDIT_PAGE_SIZE,
            position: Position::Page(page),
        },
    )
    .await?;
    let total = total.value;
    let audit_pages = total.div_ceil(AUDIT_PAGE_SIZE).max(1);
    let first = (page - 1) * AUDIT_PAGE_SIZE + 1;
    let audit_showing = if fetched.rows.is_empty() {
        String::new()
    } else {
        format!(
            "{}–{} of {}",
            first,
            first + fetched.rows.len() as u64 - 1,
            total
        )
    };
    let audit = fetched
        .rows
        .into_iter()
        .map(|e| AuditRow {
            at: When::of(&e.created_at),
            who: audit::actor_label(&e),
            what: e.action.label(),
            times: e.times,
            mode: e.mode.map(Mode::as_str),
            target: e.target,
            detail: e.detail,
            from: e.client_addr,
        })
        .collect();
    let base = Section::Team.href(scope.mode);
    let href = |p: u64| {
        if p == 1 {
            format!("{base}#audit")
        } else {
            format!("{base}?page={p}#audit")
        }
    };
    let page_view = TeamPage {
        frame: scope.frame(Section::Team, "Team"),
        notice: extra.notice,
        error: extra.error,
        members,
        add_roles: role_options(Role::Viewer),
        email_value: extra.email_typed,
        new_user: extra.new_user,
        audit,
        audit_showing,
        audit_page: page,
        audit_pages,
        audit_prev: (page > 1).then(|| href(page - 1)),
        audit_next: (page < audit_pages).then(|| href(page + 1)),
        base,
    };
    Ok(view::render(status, &page_view))
}

/// Messages after a change, by the key its redirect puts in the URL (`view::notice`).
const NOTICES: &[(&str, &str)] = &[
    ("role", "Role changed. It applies to their next page."),
    ("removed", "User removed. Their sessions have ended."),
];

pub async fn show(
    scope: Scoped<Owner>,
    State(state): State<AppState>,
    query: QueryPairs,
) -> PageResult {
    let audit_page = query
        .get("page")
        .and_then(|p| p.parse::<u64>().ok())
        .filter(|p| (1..=store::paging::MAX_PAGE).contains(p))
        .unwrap_or(1);
    let extra = Extra {
        notice: view::notice(query.get("done"), NOTICES),
        audit_page,
        ..Extra::default()
    };
    render(&state, &scope, extra, StatusCode::OK).await
}

pub async fn add(Posted(scope, state, fields): Posted<Scoped<Owner>>) -> PageResult {
    let typed = fields.get("email").trim().to_owned();
    let refuse = |error: &str| Extra {
        error: Some(error.to_owned()),
        email_typed: typed.clone(),
        ..Extra::default()
    };
    let Some(role) = Role::parse(fields.get("role")) else {
        let extra = refuse("Choose a role.");
        return render(&state, &scope, extra, StatusCode::UNPROCESSABLE_ENTITY).await;
    };
    if !scope
        .signed
        .password_reentered(&state, fields.get("password"))
        .await?
    {
        let extra = refuse(WRONG_PASSWORD);
        return render(&state, &scope, extra, StatusCode::UNPROCESSABLE_ENTITY).await;
    }
    match create_user_by(
        &state.db,
        &state.hashing,
        &scope.signed.actor(),
        scope.business_id(),
        &typed,
        role,
    )
    .await
    {
        // Rendered here, not redirected to: the password is in this response only, and the
        // same form sent again finds the e-mail taken.
        Ok(issued) => {
            let extra = Extra {
                new_user: Some(NewUser {
                    email: issued.email.clone(),
                    role: role.label(),
                    password: issued.password.clone(),
                }),
                ..Extra::default()
            };
            render(&state, &scope, extra, StatusCode::OK).await
        }
        Err(CreateUserError::InvalidEmail) => {
            let extra = refuse("That is not an e-mail address.");
            render(&state, &scope, extra, StatusCode::UNPROCESSABLE_ENTITY).await
        }
        Err(CreateUserError::EmailTaken) => {
            let extra = refuse(
                "A user with this e-mail already exists (e-mails are unique across the service). \
                 If you just added them, their password was shown once then.",
            );
            render(&state, &scope, extra, StatusCode::CONFLICT).await
        }
        Err(CreateUserError::NoSuchBusiness(_)) => {
            Err(anyhow::anyhow!("the signed-in user's business is gone").into())
        }
        Err(CreateUserError::Other(e)) => Err(e.into()),
    }
}

async fn change(
    scope: Scoped<Owner>,
    state: AppState,
    fields: FormFields,
    change: MemberChange,
) -> PageResult {
    if !scope
        .signed
        .password_reentered(&state, fields.get("password"))
        .await?
    {
        let extra = Extra {
            error: Some(WRONG_PASSWORD.into()),
            ..Extra::default()
        };
        return render(&state, &scope, extra, StatusCode::UNPROCESSABLE_ENTITY).await;
    }
    // A form's id is only looked up: text that is no member's is no such user.
    let user_id = &UserId::unchecked(fields.get("user_id"));
    let outcome = users::change_member(
        &state.db,
        &scope.signed.actor(),
        scope.business_id(),
        user_id,
        change,
        domain::time::now(),
    )
    .await?;
    let myself = *user_id == scope.signed.owner.user.id;
    match outcome {
        MemberOutcome::Done(_) if myself && change == MemberChange::Remove => {
            Ok(Redirect::to("/dashboard/sign-in?ended=1").into_response())
        }
        // No longer an owner: the Team page is not theirs any more.
        MemberOutcome::Done(_) if myself => {
            Ok(Redirect::to(&format!("/dashboard/{}/accounts", scope.mode)).into_response())
        }
        MemberOutcome::Done(_) => Ok(Redirect::to(&format!(
            "{}?done={}",
            Section::Team.href(scope.mode),
            if change == MemberChange::Remove {
                "removed"
            } else {
                "role"
            }
        ))
        .into_response()),
        MemberOutcome::NoSuchUser => {
            let extra = Extra {
                error: Some("That user is not in your team (any more): nothing changed.".into()),
                ..Extra::default()
            };
            render(&state, &scope, extra, StatusCode::NOT_FOUND).await
        }
        MemberOutcome::LastOwner => {
            let extra = Extra {
                error: Some(
                    "A business needs an owner: make someone else an owner first. Nothing \
                     changed."
                        .into(),
                ),
                ..Extra::default()
            };
            render(&state, &scope, extra, StatusCode::CONFLICT).await
        }
    }
}

pub async fn set_role(Posted(scope, state, fields): Posted<Scoped<Owner>>) -> PageResult {
    let Some(role) = Role::parse(fields.get("role")) else {
        let extra = Extra {
            error: Some("Choose a role.".into()),
            ..Extra::default()
        };
        return render(&state, &scope, extra, StatusCode::UNPROCESSABLE_ENTITY).await;
    };
    change(scope, state, fields, MemberChange::Role(role)).await
}

pub async fn remove(Posted(scope, state, fields): Posted<Scoped<Owner>>) -> PageResult {
    change(scope, state, fields, MemberChange::Remove).await
}
