-- Every panel belongs to a whole figure (not to another panel) on its own page and lies inside that figure's box
-- (one point of slack for the rounding to whole points). Returns the panels that do not.
with images as (
    select * from {{ ref('images') }}
),

panels as (
    select * from images where parent_image_id is not null
),

misplaced as (
    select panels.image_id, panels.parent_image_id, panels.page_number
    from panels
    inner join images as figure on figure.image_id = panels.parent_image_id
    where figure.parent_image_id is not null
        or figure.ref_page_id != panels.ref_page_id
        or panels.bounding_box[1] < figure.bounding_box[1] - 1
        or panels.bounding_box[2] < figure.bounding_box[2] - 1
        or panels.bounding_box[1] + panels.bounding_box[3] > figure.bounding_box[1] + figure.bounding_box[3] + 1
        or panels.bounding_box[2] + panels.bounding_box[4] > figure.bounding_box[2] + figure.bounding_box[4] + 1
)

select * from misplaced
